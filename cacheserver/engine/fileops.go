package engine

import (
	"context"
	"fmt"
	"io/fs"
)

// Size returns the true size of path: the largest of the backing file's
// size, the end of data only the cache holds, and sizes given to ExtendSize.
// A path the cache holds nothing of is answered from the backing store
// alone, without keeping a record of it: a metadata server asks for the size
// of every file it is asked about, and those records would pile up.
func (e *Engine) Size(ctx context.Context, path string) (int64, error) {
	if err := e.enter(); err != nil {
		return 0, err
	}
	defer e.leave()
	if !validPath(path) {
		return 0, fmt.Errorf("path %q: %w", path, ErrInvalid)
	}
	for {
		e.mu.Lock()
		f := e.files[path]
		if f != nil {
			f.statted = false
		}
		e.mu.Unlock()
		if f != nil {
			return e.trackedSize(ctx, path)
		}
		if size, ok, err := e.untrackedSize(ctx, path); ok {
			return size, err
		}
	}
}

// trackedSize is Size of a path the engine has a record of.
func (e *Engine) trackedSize(ctx context.Context, path string) (int64, error) {
	f, err := e.statFile(ctx, path)
	if err != nil {
		return 0, err
	}
	return e.knownSize(f), nil
}

// untrackedSize is Size of a path the engine had no record of. ok is false
// when a record appeared during the stat: the caller asks again.
func (e *Engine) untrackedSize(ctx context.Context, path string) (size int64, ok bool, err error) {
	fi, err := e.backing.Stat(ctx, path)
	e.mu.Lock()
	tracked := e.files[path] != nil
	e.mu.Unlock()
	switch {
	case tracked:
		return 0, false, nil
	case errorsIsNotExist(err):
		return 0, true, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	case err != nil:
		return 0, true, fmt.Errorf("stat %s: %w", path, err)
	}
	return fi.Size(), true, nil
}

// KnownSize returns the size only the cache knows for path: the end of data
// written here and sizes given to ExtendSize and Truncate. It does not ask
// the backing store: it is for callers that have just read the backing
// file's attributes, its size backingSize among them, and fold this in.
// A known size that the backing file has caught up with, of a file the
// cache holds no dirty data of, is forgotten: the backing file carries it
// now, and a shorter file that replaces it behind the cache must not be
// taken for longer. ok is false when the cache holds nothing of path.
func (e *Engine) KnownSize(path string, backingSize int64) (size int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.files[path]
	if f == nil || !f.record && len(f.extents) == 0 {
		return 0, false
	}
	if f.size <= backingSize && f.dirtyExtents == 0 && f.doomed == 0 {
		e.forgetSizeLocked(f)
	}
	return f.size, true
}

// forgetSizeLocked forgets the size the cache knew of f, whose backing
// file carries its size: the change goes into the file record with the
// next commit. A crash before it brings back the size, which is no larger
// than the backing file's unless a file replaced it since.
func (e *Engine) forgetSizeLocked(f *file) {
	if f.size == 0 {
		return
	}
	f.size = 0
	if f.record {
		e.markFileLocked(f)
	}
}

// ExtendSize durably records that path is at least size bytes long, for a
// file whose data past the backing end of file another server holds. It
// returns once the record is committed to the index. A file with several
// names that the engine holds no data of gets no record: its writes passed
// through, so the backing file has its size.
func (e *Engine) ExtendSize(ctx context.Context, path string, size int64) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if !validPath(path) || size < 0 {
		return fmt.Errorf("extend %q to %d: %w", path, size, ErrInvalid)
	}
	// A size recorded here is that of a write: one past the limit is
	// refused wherever it lands, as write(2) at RLIMIT_FSIZE is, even
	// within a file already past it.
	if err := e.AdmitSize(path, 0, size); err != nil {
		return err
	}
	if shared, err := e.sharedUncached(ctx, path); err != nil || shared {
		return err
	}
	if err := e.awaitUnlink(ctx, path); err != nil {
		return err
	}
	e.mu.Lock()
	f := e.fileLocked(path)
	grew := size > f.size
	if grew {
		// A size recorded for a file the engine holds no record of makes
		// one, which counts against MaxFiles as a write's does.
		e.recordLocked(f)
		f.size = size
		// Written through the cache, on another server: its write-back
		// moves the change time.
		e.writtenLocked(f)
		e.markFileLocked(f)
	}
	e.mu.Unlock()
	if !grew {
		return nil
	}
	return e.waitCommit(ctx)
}

// Sync makes the data written to path so far durable: on the cache device
// (Durability Cache: the slab is fdatasynced and the index committed), or on
// the backing store (Durability Backing: the path's dirty extents are written
// back and the backing file fsynced, and its name made durable there, rule 8
// of the package doc). Writes to a file with several names went to the
// backing file, which is fsynced whatever the durability.
func (e *Engine) Sync(ctx context.Context, path string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if e.cfg.Durability == Cache && !e.passesThrough(path) {
		// The names and attributes that calls changed are recorded too
		// (rule 8 of the package doc).
		e.wantChanges()
		return e.waitCommit(ctx)
	}
	if err := e.flushTree(ctx, path); err != nil {
		return err
	}
	err := e.backing.Sync(ctx, path)
	if errorsIsNotExist(err) && e.known(path) {
		// Nothing of the file was ever written back: nothing to sync.
		return nil
	}
	if err != nil {
		return err
	}
	if err := e.syncPathName(ctx, path); err != nil {
		return err
	}
	if e.cfg.Durability != Backing {
		return nil
	}
	// Names changed through the cache that an earlier attempt failed to
	// make durable: the file may be one of them.
	return e.syncChanged()
}

// known reports whether the cache holds anything of path.
func (e *Engine) known(path string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.files[path]
	return f != nil && (f.record || len(f.extents) > 0)
}

// Truncate sets the size of path: on the backing store, then in the cache
// (extents past size dropped, dirty ones included, the last one trimmed).
// What it changed in the cache is committed before it returns, as Trim's;
// the backing file's size is made durable as AttrsChanged says.
func (e *Engine) Truncate(ctx context.Context, path string, size int64) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if size < 0 || !validPath(path) {
		return fmt.Errorf("truncate %q to %d: %w", path, size, ErrInvalid)
	}
	if err := e.admitTruncate(ctx, path, size); err != nil {
		return err
	}
	if err := e.awaitUnlink(ctx, path); err != nil {
		return err
	}
	e.mu.Lock()
	f := e.fileLocked(path)
	e.mu.Unlock()
	// Holding wbmu keeps write-back from writing past size between the two
	// truncations.
	f.wbmu.Lock()
	if err := e.backing.Truncate(ctx, path, size); err != nil {
		f.wbmu.Unlock()
		return fmt.Errorf("truncating %s: %w", path, err)
	}
	changed := e.trimLocked(f, size)
	e.mu.Lock()
	// The size is known, but not whether the file has other names: the
	// next read or write stats it (see passThrough).
	f.backingSize, f.statted, f.exists = size, false, true
	f.sizeGen++
	e.mu.Unlock()
	f.wbmu.Unlock()
	if changed {
		if err := e.waitCommit(ctx); err != nil {
			return err
		}
	}
	// The backing file's new size is durable only once fsynced, and
	// write-back, which fsyncs what it writes, may have nothing of the
	// file left to write.
	return e.attrsChanged(ctx, path)
}

// admitTruncate refuses a truncate of path to size that grows it past
// MaxFileSize; the size it has now is asked only for a size past the limit.
func (e *Engine) admitTruncate(ctx context.Context, path string, size int64) error {
	e.mu.Lock()
	maxSize := e.tun.MaxFileSize
	e.mu.Unlock()
	if maxSize <= 0 || size <= maxSize {
		return nil
	}
	from, err := e.Size(ctx, path)
	if err != nil {
		from = 0
	}
	return e.AdmitSize(path, from, size)
}

// Trim drops what the cache holds of path past size: extents past it, dirty
// ones included, and the tail of the last one. It waits for in-flight
// write-back of the file. The backing file is left alone.
//
// What it changed is committed before it returns. A client trims every
// server before the metadata server cuts the backing file, but makes the
// file durable at close only on the servers it wrote to: extents past size
// that a crash brought back from the index would be written back, growing
// the cut file again with the data cut from it, or served from a hole that
// the file grows over later.
func (e *Engine) Trim(ctx context.Context, path string, size int64) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if size < 0 {
		return fmt.Errorf("trim %q to %d: %w", path, size, ErrInvalid)
	}
	e.mu.Lock()
	f := e.files[path]
	e.mu.Unlock()
	if f == nil {
		return nil
	}
	f.wbmu.Lock()
	changed := e.trimLocked(f, size)
	f.wbmu.Unlock()
	if !changed {
		return nil
	}
	return e.waitCommit(ctx)
}

// trimLocked trims f to size, and reports whether that changed anything
// the index records; the caller holds f.wbmu.
func (e *Engine) trimLocked(f *file, size int64) (changed bool) {
	e.mu.Lock()
	changed = f.record && f.size != size
	for _, x := range f.extents {
		if x.idx*e.es+int64(max(x.valid, x.hi)) > size {
			changed = true
			break
		}
	}
	e.mu.Unlock()
	e.dropExtents(f, func(x *extent) bool { return x.idx*e.es >= size }, true)
	e.mu.Lock()
	x := f.extents[size/e.es]
	e.mu.Unlock()
	if in := int32(size % e.es); x != nil && in > 0 {
		x.mu.Lock()
		e.mu.Lock()
		e.trimExtentLocked(x, in)
		e.mu.Unlock()
		x.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f.record || len(f.extents) > 0 {
		f.size = size
	} else {
		// The cache holds nothing of the file: the backing file, which
		// Truncate cuts, has its size. A size kept here would outlive
		// truncations through other names of the file, whose I/O passes
		// through to the backing file: once it has one name again, reads
		// would stop at the stale size, and a metadata server would
		// answer it as the file's size.
		f.size = 0
	}
	f.backingSize = min(f.backingSize, size)
	f.sizeGen++
	if f.record {
		e.markFileLocked(f)
	}
	return changed
}

// trimExtentLocked cuts x, held exclusively, to in bytes.
func (e *Engine) trimExtentLocked(x *extent, in int32) {
	if x.state != ready || x.valid <= in && x.hi <= in {
		return
	}
	x.valid = min(x.valid, in)
	if x.dirty() {
		if in <= x.lo {
			e.setCleanLocked(x)
		} else if x.hi > in {
			e.dirtyBytes -= int64(x.hi - in)
			x.hi = in
		}
	}
	x.gen++
	e.gens.bump(x.slot)
	e.markExtLocked(x)
}

// dropExtents removes the extents of f that match, dirty ones only if
// dropDirty, and returns how many dirty extents it left. The caller holds
// f.wbmu exclusively, so no write-back of f is in flight.
func (e *Engine) dropExtents(f *file, match func(*extent) bool, dropDirty bool) int {
	e.mu.Lock()
	xs := make([]*extent, 0, len(f.extents))
	for _, x := range f.extents {
		if match(x) {
			xs = append(xs, x)
		}
	}
	e.mu.Unlock()
	left := 0
	for _, x := range xs {
		x.mu.Lock()
		e.mu.Lock()
		if dropDirty || !x.dirty() {
			e.removeExtentLocked(x)
		} else {
			left++
		}
		e.mu.Unlock()
		x.mu.Unlock()
	}
	return left
}
