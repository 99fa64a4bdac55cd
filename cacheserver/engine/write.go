package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// errDropped: the file was dropped while an operation was using it.
var errDropped = errors.New("file dropped")

// errPassThrough: the write goes straight to the backing file (see
// passThrough).
var errPassThrough = errors.New("write passes through")

// WriteAt writes p to path at off. An extent wholly overwritten needs no
// read; a partial write of a missing extent copies it up first. Data lands
// in the cache and is written back later; see Sync for durability.
func (e *Engine) WriteAt(ctx context.Context, path string, p []byte, off int64) (int, error) {
	if err := e.enter(); err != nil {
		return 0, err
	}
	defer e.leave()
	f, err := e.fileForWrite(ctx, path, off, int64(len(p)))
	if errors.Is(err, errPassThrough) {
		return e.writeThrough(ctx, f, p, off)
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx, in := pos/e.es, pos%e.es
		chunk := int(min(e.es-in, int64(len(p)-n)))
		err := e.writeExtent(ctx, f, idx, int32(in), p[n:n+chunk])
		if errors.Is(err, errDropped) {
			// The file was unlinked meanwhile: the write went to it.
			return len(p), nil
		}
		if err != nil {
			return n, fmt.Errorf("writing %s at %d: %w", path, pos, err)
		}
		n += chunk
		e.grow(f, off+int64(n))
	}
	e.mu.Lock()
	e.st.bytesWritten += int64(n)
	e.lastIO = time.Now()
	e.mu.Unlock()
	return n, nil
}

// fileForWrite checks the limits and returns the state of path.
func (e *Engine) fileForWrite(ctx context.Context, path string, off, n int64) (*file, error) {
	if off < 0 {
		return nil, fmt.Errorf("write %s at %d: %w", path, off, ErrInvalid)
	}
	e.mu.Lock()
	ro, failed, maxSize := e.readOnlyLocked(), e.deviceErr, e.tun.MaxFileSize
	e.mu.Unlock()
	if failed != nil && !accepted(ctx) {
		return nil, fmt.Errorf("write %s: %w", path, failed)
	}
	if ro && !pastLimits(ctx) {
		return nil, fmt.Errorf("write %s: %w", path, ErrReadOnly)
	}
	if maxSize > 0 && off+n > maxSize {
		return nil, fmt.Errorf("write %s up to %d, limit %d: %w", path, off+n, maxSize, ErrFileTooLarge)
	}
	if err := e.awaitUnlink(ctx, path); err != nil {
		return nil, err
	}
	f, err := e.statFile(ctx, path)
	if err != nil && !errorsIsNotExist(err) {
		return nil, err
	}
	if err == nil {
		// A partial write would otherwise merge the extents of a file
		// that the writer's replaced into the new one. A check that fails
		// leaves the write as before: pages that a client's kernel wrote
		// back (Accepted) are gone from it if the write fails.
		if g, err := e.unlessReplaced(ctx, f); err == nil {
			f = g
		}
	}
	if err == nil && e.passThrough(f) {
		return f, errPassThrough
	}
	return f, e.claimFile(ctx, f)
}

// claimFile gives f a file record, counted against MaxFiles if it counts
// here (Share) but never refused for it (see recordLocked), and remembers the writer's identity for write-back.
func (e *Engine) claimFile(ctx context.Context, f *file) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.recordLocked(f)
	if c, ok := ident.FromContext(ctx); ok && (f.cred == nil || c.String() != f.cred.String()) {
		f.cred = &c
		e.markFileLocked(f)
	}
	return nil
}

// grow raises the known size of f to end.
func (e *Engine) grow(f *file, end int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if end > f.size {
		f.size = end
		e.markFileLocked(f)
	}
}

// writeExtent writes data at offset in of extent idx of f.
func (e *Engine) writeExtent(ctx context.Context, f *file, idx int64, in int32, data []byte) error {
	for {
		e.mu.Lock()
		x, dead := f.extents[idx], f.dead
		inPlace := x != nil && x.state == ready && x.dirty()
		e.mu.Unlock()
		if dead {
			return errDropped
		}
		if inPlace {
			if done, err := e.tryWriteInPlace(x, in, data); done {
				return err
			}
			continue
		}
		done, err := e.writeNewSlot(ctx, f, idx, in, data)
		if done {
			return err
		}
	}
}

// tryWriteInPlace writes into a dirty extent's own slot. A crash before the
// next commit leaves bytes changed in a dirty extent, which recovery writes
// back whole (see recoverExtent). done is false when x is no longer dirty.
func (e *Engine) tryWriteInPlace(x *extent, in int32, data []byte) (done bool, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e.mu.Lock()
	ok := x.state == ready && x.dirty()
	e.mu.Unlock()
	if !ok {
		return false, nil
	}
	end := in + int32(len(data))
	if in > x.valid {
		if err := e.writeZeros(x.slot, x.valid, in); err != nil {
			return true, err
		}
	}
	if err := e.slab.WriteAt(int(x.slot), data, int64(in)); err != nil {
		return true, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.countDeviceWriteLocked(int64(end - min(in, x.valid)))
	x.valid = max(x.valid, end)
	e.setDirtyLocked(x, in, end)
	return true, nil
}

// writeNewSlot writes into a fresh slot: for a missing extent (copying it up
// when the write is partial) or, copy-on-write, for a clean one, whose slot
// must not change in place: after a crash the index would call the changed
// bytes clean. done is false when the caller must look again.
func (e *Engine) writeNewSlot(ctx context.Context, f *file, idx int64, in int32, data []byte) (bool, error) {
	slot, err := e.allocSlot(ctx, f, idx, true)
	if err != nil {
		return true, err
	}
	e.mu.Lock()
	x := f.extents[idx]
	e.mu.Unlock()
	if x == nil {
		x, err = e.placeholder(f, idx, slot)
		if x == nil || err != nil {
			return err != nil, err
		}
		defer x.mu.Unlock()
		return true, e.fillNew(ctx, x, slot, in, data)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	e.mu.Lock()
	clean := x.state == ready && !x.dirty()
	e.mu.Unlock()
	if !clean {
		e.releaseSlot(slot)
		return false, nil
	}
	return true, e.copyOnWrite(x, slot, in, data)
}
