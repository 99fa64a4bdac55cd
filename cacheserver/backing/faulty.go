package backing

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"
)

// Op names a Store method, for Faulty's rules and counters.
type Op string

// The operations Faulty can slow down, fail and count.
const (
	OpReadAt   Op = "ReadAt"
	OpWriteAt  Op = "WriteAt"
	OpStat     Op = "Stat"
	OpTruncate Op = "Truncate"
	OpSync     Op = "Sync"
	OpSyncDir  Op = "SyncDir"
	OpRemove   Op = "Remove"
	OpRename   Op = "Rename"
	OpReadDir  Op = "ReadDir"
	// OpCopyRange is RangeCopier.CopyRange. Its faults strike halfway
	// through the range, after half of it was copied.
	OpCopyRange Op = "CopyRange"
)

// Faulty wraps a Store, adding latency and errors to chosen operations and
// counting calls. It implements RangeCopier, forwarding to the wrapped Store
// when that does and failing with errors.ErrUnsupported when it does not.
// Its methods are safe for concurrent use.
type Faulty struct {
	Store

	mu      sync.Mutex
	errs    map[Op]error
	latency map[Op]time.Duration
	calls   sync.Map // Op -> *atomic.Int64
}

// NewFaulty wraps s with no faults.
func NewFaulty(s Store) *Faulty {
	return &Faulty{Store: s, errs: map[Op]error{}, latency: map[Op]time.Duration{}}
}

// SetError makes op fail with err; nil clears the fault.
func (f *Faulty) SetError(op Op, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[op] = err
}

// SetLatency delays every call of op by d.
func (f *Faulty) SetLatency(op Op, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.latency[op] = d
}

// Calls returns how many times op was called.
func (f *Faulty) Calls(op Op) int64 {
	c, _ := f.calls.LoadOrStore(op, new(atomic.Int64))
	return c.(*atomic.Int64).Load()
}

func (f *Faulty) enter(op Op) error {
	c, _ := f.calls.LoadOrStore(op, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	f.mu.Lock()
	err, d := f.errs[op], f.latency[op]
	f.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return err
}

// ReadAt implements Store.
func (f *Faulty) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	if err := f.enter(OpReadAt); err != nil {
		return 0, err
	}
	return f.Store.ReadAt(ctx, p, b, off)
}

// WriteAt implements Store.
func (f *Faulty) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	if err := f.enter(OpWriteAt); err != nil {
		return 0, err
	}
	return f.Store.WriteAt(ctx, p, b, off)
}

// Stat implements Store.
func (f *Faulty) Stat(ctx context.Context, p string) (fs.FileInfo, error) {
	if err := f.enter(OpStat); err != nil {
		return nil, err
	}
	return f.Store.Stat(ctx, p)
}

// FileID implements Identifier, as a Stat.
func (f *Faulty) FileID(ctx context.Context, p string) (FileID, error) {
	if err := f.enter(OpStat); err != nil {
		return FileID{}, err
	}
	return IDOf(ctx, f.Store, p)
}

// Truncate implements Store.
func (f *Faulty) Truncate(ctx context.Context, p string, size int64) error {
	if err := f.enter(OpTruncate); err != nil {
		return err
	}
	return f.Store.Truncate(ctx, p, size)
}

// Sync implements Store.
func (f *Faulty) Sync(ctx context.Context, p string) error {
	if err := f.enter(OpSync); err != nil {
		return err
	}
	return f.Store.Sync(ctx, p)
}

// SyncDir implements Store.
func (f *Faulty) SyncDir(ctx context.Context, p string) error {
	if err := f.enter(OpSyncDir); err != nil {
		return err
	}
	return f.Store.SyncDir(ctx, p)
}

// Remove implements Store.
func (f *Faulty) Remove(ctx context.Context, p string) error {
	if err := f.enter(OpRemove); err != nil {
		return err
	}
	return f.Store.Remove(ctx, p)
}

// Rename implements Store.
func (f *Faulty) Rename(ctx context.Context, oldPath, newPath string) error {
	if err := f.enter(OpRename); err != nil {
		return err
	}
	return f.Store.Rename(ctx, oldPath, newPath)
}

// ReadDir implements Store.
func (f *Faulty) ReadDir(ctx context.Context, p string) ([]fs.DirEntry, error) {
	if err := f.enter(OpReadDir); err != nil {
		return nil, err
	}
	return f.Store.ReadDir(ctx, p)
}

// CopyRange implements RangeCopier. A fault set for OpCopyRange lets the
// first half of the range be copied before it fails, as a copy cut short by
// an I/O error would, so that tests see a partly written destination.
func (f *Faulty) CopyRange(ctx context.Context, p string, off int64, dst int, dstOff, n int64) (int64, error) {
	rc, ok := f.Store.(RangeCopier)
	if !ok {
		return 0, fmt.Errorf("copying %s: %w", p, errors.ErrUnsupported)
	}
	if err := f.enter(OpCopyRange); err != nil {
		copied, _ := rc.CopyRange(ctx, p, off, dst, dstOff, n/2)
		return copied, err
	}
	return rc.CopyRange(ctx, p, off, dst, dstOff, n)
}

// CopyRanges implements RangeCopier. Each copy of the CopyFunc counts as
// an OpCopyRange, and a fault set for it cuts that copy short as in
// CopyRange.
func (f *Faulty) CopyRanges(ctx context.Context, p string, fn func(CopyFunc, bool) error) error {
	rc, ok := f.Store.(RangeCopier)
	if !ok {
		return fmt.Errorf("copying %s: %w", p, errors.ErrUnsupported)
	}
	return rc.CopyRanges(ctx, p, func(cp CopyFunc, readsAhead bool) error {
		return fn(func(off int64, dst int, dstOff, n int64) (int64, error) {
			if err := f.enter(OpCopyRange); err != nil {
				copied, _ := cp(off, dst, dstOff, n/2)
				return copied, err
			}
			return cp(off, dst, dstOff, n)
		}, readsAhead)
	})
}
