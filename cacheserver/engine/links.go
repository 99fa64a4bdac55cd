package engine

import (
	"context"
	"fmt"
	"io/fs"
	"syscall"
)

// multiLinked reports whether the backing file fi has more than one name.
func multiLinked(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink > 1
}

// passThrough reports whether I/O on f goes straight to the backing file:
// it has several names and the cache holds no data of it. Cached data is
// keyed by path, so caching such a file would let its names disagree.
func (e *Engine) passThrough(f *file) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return f.shared && len(f.extents) == 0
}

// writeThrough writes p to the backing file of f at off, as the caller.
func (e *Engine) writeThrough(ctx context.Context, f *file, p []byte, off int64) (int, error) {
	n, err := e.backing.WriteAt(ctx, f.path, p, off)
	e.mu.Lock()
	f.backingSize = max(f.backingSize, off+int64(n))
	f.sizeGen++
	e.st.bytesWritten += int64(n)
	e.mu.Unlock()
	return n, err
}

// sharedUncached reports whether path is a backing file with several names
// of which the engine holds no data, asking the backing store unless the
// engine holds data of it.
func (e *Engine) sharedUncached(ctx context.Context, path string) (bool, error) {
	e.mu.Lock()
	f := e.files[path]
	cached := f != nil && len(f.extents) > 0
	e.mu.Unlock()
	if cached {
		return false, nil
	}
	fi, err := e.backing.Stat(ctx, path)
	if errorsIsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	return multiLinked(fi), nil
}

// passesThrough reports whether I/O on path passes through (see
// passThrough), as far as the engine knows.
func (e *Engine) passesThrough(path string) bool {
	e.mu.Lock()
	f := e.files[path]
	e.mu.Unlock()
	return f != nil && e.passThrough(f)
}
