package vfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
)

// preimage is what a range of a file held before an unsynced write.
type preimage struct {
	off  int64
	data []byte
}

type crashFile struct {
	fs *Crashable
	f  File

	mu       sync.Mutex
	unsynced []preimage
}

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.io.RLock()
	defer f.fs.io.RUnlock()
	if err := f.fs.alive(); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

// WriteAt records the bytes it overwrites, so that a crash can undo it.
func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.io.RLock()
	defer f.fs.io.RUnlock()
	if err := f.fs.alive(); err != nil {
		return 0, err
	}
	old := make([]byte, len(p))
	n, _ := f.f.ReadAt(old, off)
	f.mu.Lock()
	f.unsynced = append(f.unsynced, preimage{off: off, data: old[:n]})
	f.mu.Unlock()
	return f.f.WriteAt(p, off)
}

// WriteByDescriptor records the bytes of [off, off+n) before fn writes
// there, as WriteAt does, so that a crash can undo a copy the kernel made.
// It fails with errors.ErrUnsupported when the underlying file offers no
// descriptor.
func (f *crashFile) WriteByDescriptor(off, n int64, fn func(fd int) (int64, error)) (int64, error) {
	dw, ok := f.f.(DescriptorWriter)
	if !ok {
		return 0, fmt.Errorf("writing by descriptor: %w", errors.ErrUnsupported)
	}
	f.fs.io.RLock()
	defer f.fs.io.RUnlock()
	if err := f.fs.alive(); err != nil {
		return 0, err
	}
	old := make([]byte, n)
	m, _ := f.f.ReadAt(old, off)
	f.mu.Lock()
	f.unsynced = append(f.unsynced, preimage{off: off, data: old[:m]})
	f.mu.Unlock()
	return dw.WriteByDescriptor(off, n, fn)
}

// Sync is a durable step: the writes before it survive a later crash.
func (f *crashFile) Sync() error {
	f.mu.Lock()
	pending := len(f.unsynced)
	f.mu.Unlock()
	if err := f.fs.step(); err != nil {
		return err
	}
	if err := f.f.Sync(); err != nil {
		return err
	}
	// A crash during the fsync may have undone the writes already: the
	// Sync then failed, as it would on a machine that lost power.
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.crashed {
		return ErrCrashed
	}
	f.mu.Lock()
	f.unsynced = f.unsynced[pending:]
	f.mu.Unlock()
	return nil
}

func (f *crashFile) Allocate(off, n int64) error {
	if err := f.fs.alive(); err != nil {
		return err
	}
	return f.f.Allocate(off, n)
}

func (f *crashFile) Size() (int64, error) { return f.f.Size() }

func (f *crashFile) Close() error { return f.f.Close() }

// undo reverts unsynced writes, newest first, each with probability 3/4:
// the disk may have persisted any subset of them, in any order.
func (f *crashFile) undo(rng *rand.Rand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.unsynced) - 1; i >= 0; i-- {
		if rng.IntN(4) == 0 {
			continue
		}
		pi := f.unsynced[i]
		// Undoing is best effort: a failure shows as a mismatch in the
		// test that crashed the file.
		_, _ = f.f.WriteAt(pi.data, pi.off)
	}
	f.unsynced = nil
}
