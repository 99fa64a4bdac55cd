package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// copyToSlot copies extent idx of f from the backing store into slot and
// returns how many bytes the backing file has there. The kernel copies them
// (splice) when the backing store is a backing.RangeCopier and the slab
// offers its descriptor, through cp if it is not nil (a backing file open
// for a run of copies); otherwise, or when the kernel cannot copy between
// the two files, they pass through buf, and inBuf says they are there. On
// an error the slot holds anything: the caller must not publish it.
func (e *Engine) copyToSlot(ctx context.Context, f *file, idx int64, slot int32, cp backing.CopyFunc, buf []byte) (n int, inBuf bool, err error) {
	start := time.Now()
	defer func() {
		if err == nil {
			e.copyUpTimes.add(time.Since(start))
		}
	}()
	n, err = e.copyInKernel(ctx, f, idx, slot, cp)
	if !errors.Is(err, errors.ErrUnsupported) {
		return n, false, err
	}
	if n, err = e.readBacking(ctx, f, idx, buf); err != nil {
		return 0, true, err
	}
	return n, true, e.slab.WriteAt(int(slot), buf[:n], 0)
}

// copyInKernel copies extent idx of f into slot without the bytes passing
// through the engine's memory. It fails with errors.ErrUnsupported when it
// cannot, and from then on without trying: the backing store and the slab
// stay the same, so the kernel would refuse again.
func (e *Engine) copyInKernel(ctx context.Context, f *file, idx int64, slot int32, cp backing.CopyFunc) (int, error) {
	rc, ok := e.backing.(backing.RangeCopier)
	if !ok || e.noKernelCopy.Load() {
		return 0, errors.ErrUnsupported
	}
	n, err := e.slab.WriteByDescriptor(int(slot), 0, e.es, func(fd int, at int64) (int64, error) {
		if cp != nil {
			return cp(idx*e.es, fd, at, e.es)
		}
		return rc.CopyRange(ctx, f.path, idx*e.es, fd, at, e.es)
	})
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		if !e.noKernelCopy.Swap(true) {
			e.log.Info("Copying up through memory", "reason", err.Error())
		}
		return 0, err
	case errorsIsNotExist(err):
		// As for reads: a file gone from the backing store has no data.
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("copying up extent %d of %s: %w", idx, f.path, err)
	}
	return int(n), nil
}

// serveCopy fills p with bytes [in, in+len(p)) of an extent just copied up
// with n bytes of data: from buf when the copy passed through it, or else
// from the slot, which the page cache holds right after the copy. Past n
// the extent reads as zeros.
func (e *Engine) serveCopy(slot int32, n int, inBuf bool, buf, p []byte, in int64) error {
	if inBuf {
		clear(buf[n:])
		copy(p, buf[in:])
		return nil
	}
	m := max(min(int64(n)-in, int64(len(p))), 0)
	if m > 0 {
		if err := e.slab.ReadAt(int(slot), p[:m], in); err != nil {
			return err
		}
	}
	clear(p[m:])
	return nil
}
