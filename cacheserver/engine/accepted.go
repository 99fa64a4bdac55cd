package engine

import (
	"context"
	"fmt"
)

type acceptedKey struct{}

// Accepted marks ctx for writes whose bytes the job was already told were
// written: pages of a client's page cache that its kernel writes back. The
// job cannot retry such a write, and a kernel drops the pages of one that
// fails, so the cache's own limit on new writes (the write window) does
// not turn it away; its bytes count in the write window as
// every write's do. MaxFileSize, a limit of the file the job wrote past,
// still holds.
func Accepted(ctx context.Context) context.Context {
	return context.WithValue(ctx, acceptedKey{}, true)
}

// accepted reports whether ctx was marked by Accepted.
func accepted(ctx context.Context) bool {
	v, _ := ctx.Value(acceptedKey{}).(bool)
	return v
}

type completingKey struct{}

// Completing marks ctx for a piece of a write whose later pieces other
// servers already took: refused, the write would leave bytes landed past a
// hole, which write(2) never does. The cache's own limit on new writes
// (the write window) does not turn it away, as it does not turn Accepted
// writes away; unlike those, it does not wait for space that data
// the backing store refuses holds, but fails as a new write does.
func Completing(ctx context.Context) context.Context {
	return context.WithValue(ctx, completingKey{}, true)
}

// pastLimits reports whether the write of ctx passes the write window: it
// was marked by Accepted or Completing.
func pastLimits(ctx context.Context) bool {
	v, _ := ctx.Value(completingKey{}).(bool)
	return v || accepted(ctx)
}

// AdmitWriter answers, for an open of path for writing, the error that a
// write would meet now: ErrCacheDevice once the cache device failed, and
// ErrReadOnly while the write window is used up. (The limit on files holds
// at open through ReserveFile.) A job whose writes its kernel gathers in
// the page cache (gathered) learns of the limits there, at open, as it
// would from write(2) otherwise: its writes reach the cache later, marked
// Accepted, and pass them. Such writes also wait for space, which, while every slot holds
// data the backing store refuses (see allocSlot), only someone acting on
// the backing store can free; a gathered open then gets the backing
// store's error, rather than a job that hangs at close.
func (e *Engine) AdmitWriter(path string, gathered bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deviceErr != nil {
		return fmt.Errorf("open %s for writing: %w", path, e.deviceErr)
	}
	if e.readOnlyLocked() {
		return fmt.Errorf("open %s for writing: %w", path, ErrReadOnly)
	}
	if gathered && e.refusingLocked() {
		return fmt.Errorf("open %s for writing: every slot of the cache holds data the backing store refuses: %w", path, e.st.lastWBErr)
	}
	return nil
}

// AdmitSize returns ErrFileTooLarge if path may not change from size from
// to size to: growth past MaxFileSize. A file already past the limit (one
// written on the backing store) may shrink, to a size past the limit or
// below it, as the kernel lets a process past RLIMIT_FSIZE shrink a file.
// A metadata server asks it before it sets the size of the backing file, or
// announces a size, for a change that the servers holding the data would
// refuse: the refused change must not be made there either.
func (e *Engine) AdmitSize(path string, from, to int64) error {
	e.mu.Lock()
	maxSize := e.tun.MaxFileSize
	e.mu.Unlock()
	if maxSize > 0 && to > maxSize && to > from {
		return fmt.Errorf("size of %s from %d to %d, limit %d: %w", path, from, to, maxSize, ErrFileTooLarge)
	}
	return nil
}
