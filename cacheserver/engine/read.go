package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// ReadAt reads len(p) bytes of path at off. A missing extent is first
// copied up from the backing file (zero-filled past the backing end of file);
// concurrent readers of the same missing extent share one copy-up. The read
// stops at the size the engine knows for the file, with io.EOF.
func (e *Engine) ReadAt(ctx context.Context, path string, p []byte, off int64) (int, error) {
	if err := e.enter(); err != nil {
		return 0, err
	}
	defer e.leave()
	if off < 0 {
		return 0, fmt.Errorf("read %s at %d: %w", path, off, ErrInvalid)
	}
	f, err := e.fileForRead(ctx, path)
	if err == nil {
		f, err = e.unlessReplaced(ctx, f)
	}
	if err != nil {
		return 0, err
	}
	size := e.knownSize(f)
	if off >= size {
		return 0, io.EOF
	}
	want := int(min(int64(len(p)), size-off))
	var n int
	if e.passThrough(f) {
		n, err = backing.ReadFull(ctx, e.backing, path, p[:want], off)
		clear(p[n:want])
		n = want
	} else {
		n, err = e.readRange(ctx, f, p[:want], off)
	}
	e.mu.Lock()
	e.st.bytesRead += int64(n)
	e.lastIO = time.Now()
	e.mu.Unlock()
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

func (e *Engine) readRange(ctx context.Context, f *file, p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		idx, in := pos/e.es, pos%e.es
		chunk := int(min(e.es-in, int64(len(p)-n)))
		if err := e.readExtent(ctx, f, idx, p[n:n+chunk], in); err != nil {
			return n, fmt.Errorf("reading %s at %d: %w", f.path, pos, err)
		}
		n += chunk
	}
	return n, nil
}

// knownSize is the size reads stop at.
func (e *Engine) knownSize(f *file) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f.shared && len(f.extents) == 0 {
		// Writes passed through: the backing file, just statted, is the
		// truth, and a size recorded under one name is stale under another.
		return f.backingSize
	}
	return max(f.size, f.backingSize)
}

// fileForRead returns the state of path for a read. A path the engine
// holds nothing of is looked up on the backing store before a record is
// made for it, so that reads of missing files, like Size, leave no state
// behind.
func (e *Engine) fileForRead(ctx context.Context, path string) (*file, error) {
	if !validPath(path) {
		return nil, fmt.Errorf("path %q: %w", path, ErrInvalid)
	}
	e.mu.Lock()
	tracked := e.files[path] != nil
	e.mu.Unlock()
	if tracked {
		return e.statFile(ctx, path)
	}
	fi, err := e.backing.Stat(ctx, path)
	if err != nil && !errorsIsNotExist(err) {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	e.mu.Lock()
	f := e.files[path]
	if f == nil && err == nil {
		f = e.fileLocked(path)
		f.statted, f.exists, f.backingSize, f.shared = true, true, fi.Size(), multiLinked(fi)
		e.mu.Unlock()
		return f, nil
	}
	e.mu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	// A record appeared during the stat: it may know more than the stat.
	return e.statFile(ctx, path)
}

// statFile returns the state of path, learning the backing file's size on
// first use. A file that neither the cache nor the backing store knows is
// fs.ErrNotExist.
func (e *Engine) statFile(ctx context.Context, path string) (*file, error) {
	if !validPath(path) {
		return nil, fmt.Errorf("path %q: %w", path, ErrInvalid)
	}
	e.mu.Lock()
	f := e.fileLocked(path)
	// A file seen missing is looked up again: another server, or the
	// metadata server, may have created it since.
	// So is a file with several names, whose size changes under them all.
	statted := f.statted && !f.shared && (f.exists || f.record || len(f.extents) > 0)
	e.mu.Unlock()
	for try := 0; !statted; try++ {
		var err error
		if statted, err = e.statBacking(ctx, f, try >= 3); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !f.exists && !f.record && len(f.extents) == 0 {
		return f, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	return f, nil
}

// statBacking learns the size of f's backing file. A write-back, truncate
// or trim during the stat changes the size after the stat read it: the
// result is dropped (false: stat again), or after repeated races merged
// with what the engine knows (last).
func (e *Engine) statBacking(ctx context.Context, f *file, last bool) (bool, error) {
	e.mu.Lock()
	gen := f.sizeGen
	e.mu.Unlock()
	fi, err := e.backing.Stat(ctx, f.path)
	if err != nil && !errorsIsNotExist(err) {
		return false, fmt.Errorf("stat %s: %w", f.path, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f.sizeGen != gen && !last {
		return false, nil
	}
	size, exists := int64(0), err == nil
	f.shared = false
	if exists {
		size, f.shared = fi.Size(), multiLinked(fi)
	}
	if f.sizeGen != gen {
		size, exists = max(size, f.backingSize), exists || f.exists
	}
	f.statted, f.exists, f.backingSize = true, exists, size
	return true, nil
}

// readExtent copies extent idx of f, from offset in, into p, copying it up
// first if missing. An empty p only makes sure the extent is cached.
func (e *Engine) readExtent(ctx context.Context, f *file, idx int64, p []byte, in int64) error {
	for {
		e.mu.Lock()
		x := f.extents[idx]
		e.mu.Unlock()
		if x == nil {
			// Start the read-ahead first, so that it overlaps this copy-up.
			e.prefetchAfter(ctx, f, idx, in, true)
			served, err := e.copyUp(ctx, f, idx, p, in)
			if errors.Is(err, errDropped) || (errors.Is(err, errNoRoom) && p != nil) {
				return e.readUncached(ctx, f, idx, p, in)
			}
			if served || err != nil {
				return err
			}
			// Another reader's copy-up got there first: reading what it
			// copied is a hit, as for a reader that came a moment later.
			continue
		}
		x.mu.RLock()
		done, prefetched, err := e.readCached(x, p, in)
		x.mu.RUnlock()
		if prefetched {
			e.prefetchAfter(ctx, f, idx, in, false)
		}
		if done || err != nil {
			return err
		}
	}
}

// readUncached reads from the backing store directly, for a file dropped
// while it was read, or an extent no slot is free for (errNoRoom; a preload,
// whose p is nil, gets that error instead).
func (e *Engine) readUncached(ctx context.Context, f *file, idx int64, p []byte, in int64) error {
	n, err := backing.ReadFull(ctx, e.backing, f.path, p, idx*e.es+in)
	clear(p[n:])
	return err
}

// readCached serves p from x, which the caller holds shared; done is false
// when x died meanwhile.
func (e *Engine) readCached(x *extent, p []byte, in int64) (done, prefetched bool, err error) {
	e.mu.Lock()
	if x.state != ready {
		e.mu.Unlock()
		return false, false, nil
	}
	prefetched, x.prefetched = x.prefetched, false
	e.st.hits++
	if x.list == &e.clean {
		e.clean.moveToBack(x)
	}
	slot, valid := x.slot, int64(x.valid)
	ahead, n := e.readAheadSlots(x.f, x.idx, in)
	e.mu.Unlock()
	e.readAhead(ahead[:n])
	if n := max(min(valid-in, int64(len(p))), 0); n > 0 {
		if err := e.slab.ReadAt(int(slot), p[:n], in); err != nil {
			return true, prefetched, err
		}
		clear(p[n:])
	} else {
		clear(p)
	}
	return true, prefetched, nil
}

// copyUp brings extent idx of f into the cache and serves p from offset in
// of it, unless someone else is copying it up (served is false: read it).
func (e *Engine) copyUp(ctx context.Context, f *file, idx int64, p []byte, in int64) (served bool, err error) {
	e.learnSource(ctx, f)
	slot, err := e.allocSlot(ctx, f, idx, false)
	if err != nil {
		return false, err
	}
	x, err := e.copyPlaceholder(f, idx, slot)
	if x == nil || err != nil {
		return false, err
	}
	return true, e.fillCopy(ctx, x, slot, nil, p, in)
}

// fillCopy copies the extent of placeholder x, which the caller holds
// exclusively, up into slot, through cp if it is not nil (see copyToSlot),
// publishes it, serves p from offset in of it, and releases x. A nil p is
// a copy-up ahead of the readers.
func (e *Engine) fillCopy(ctx context.Context, x *extent, slot int32, cp backing.CopyFunc, p []byte, in int64) error {
	defer x.mu.Unlock()
	buf := e.getBuf()
	defer e.putBuf(buf)
	n, inBuf, err := e.copyToSlot(ctx, x.f, x.idx, slot, cp, *buf)
	if err := e.finishCopyUp(x, slot, n, p == nil, err); err != nil {
		return err
	}
	return e.serveCopy(slot, n, inBuf, *buf, p, in)
}

// finishCopyUp publishes a copied-up placeholder clean, or abandons it.
// A copy-up nobody reads yet (prefetched) marks the extent for read-ahead.
func (e *Engine) finishCopyUp(x *extent, slot int32, n int, prefetched bool, err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.abandonLocked(x, slot)
		return err
	}
	e.st.misses++
	e.st.copyUp += int64(n)
	e.countDeviceWriteLocked(int64(n))
	e.publishLocked(x, slot, int32(n))
	e.clean.pushBack(x)
	x.prefetched = prefetched
	return nil
}

// placeholder inserts a loading extent idx of f holding slot, locked
// exclusively by the caller. It returns nil, releasing the slot, when the
// extent exists already (the caller retries) or f was dropped.
func (e *Engine) placeholder(f *file, idx int64, slot int32) (*extent, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.placeholderLocked(f, idx, slot)
}

// copyPlaceholder is placeholder for a copy-up.
func (e *Engine) copyPlaceholder(f *file, idx int64, slot int32) (*extent, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f.copyingLocked()
	return e.placeholderLocked(f, idx, slot)
}

// placeholderLocked is placeholder for a caller that holds e.mu.
func (e *Engine) placeholderLocked(f *file, idx int64, slot int32) (*extent, error) {
	if f.extents[idx] != nil || f.dead {
		e.releaseSlotLocked(slot)
		if f.dead {
			return nil, errDropped
		}
		return nil, nil
	}
	x := &extent{f: f, idx: idx, state: loading, slot: -1}
	x.mu.Lock()
	f.extents[idx] = x
	if len(f.extents) == 1 {
		e.sourceChangedLocked(f)
	}
	return x, nil
}

// abandonLocked removes a placeholder whose fill failed.
func (e *Engine) abandonLocked(x *extent, slot int32) {
	x.state = dead
	delete(x.f.extents, x.idx)
	if len(x.f.extents) == 0 {
		e.sourceChangedLocked(x.f)
	}
	e.releaseSlotLocked(slot)
}

// publishLocked makes a filled placeholder ready. Its slot data is written,
// so the index entry queued here is committed after the data.
func (e *Engine) publishLocked(x *extent, slot, valid int32) {
	x.state, x.slot, x.valid = ready, slot, valid
	e.markExtLocked(x)
	e.cond.Broadcast()
}

// readBacking reads extent idx of f from the backing store into buf and
// returns how many bytes the backing file has there.
func (e *Engine) readBacking(ctx context.Context, f *file, idx int64, buf []byte) (int, error) {
	n, err := backing.ReadFull(ctx, e.backing, f.path, buf[:e.es], idx*e.es)
	if err != nil {
		return 0, fmt.Errorf("copying up extent %d of %s: %w", idx, f.path, err)
	}
	return n, nil
}
