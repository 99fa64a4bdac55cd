package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"
)

// Unlink removes path from the backing store, then forgets it in the
// cache, dirty data included. A file only the cache held (never written
// back) is not an error; a refused removal leaves the cache alone. The
// removal is made durable as NamesRemoved says.
func (e *Engine) Unlink(ctx context.Context, p string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	f := e.lookup(p)
	if f == nil {
		return e.removeBacking(ctx, p)
	}
	// Holding wbmu keeps write-back from recreating the file in between.
	f.wbmu.Lock()
	err := e.removeBacking(ctx, p)
	if err != nil && !errorsIsNotExist(err) {
		f.wbmu.Unlock()
		return err
	}
	had := e.dropLocked(f)
	f.wbmu.Unlock()
	if errorsIsNotExist(err) && !had {
		return err
	}
	// Durable step: the index without the file. A crash before it finds the
	// file's extents again, dirty ones included, and write-back would bring
	// the file back; after it, the file stays gone. (A crash between the
	// removal and here still can: the unlink had not returned.)
	return e.waitCommit(ctx)
}

// removeBacking removes the backing file p, and records the removal for
// the next flush to make durable.
func (e *Engine) removeBacking(ctx context.Context, p string) error {
	err := e.backing.Remove(ctx, p)
	if err == nil {
		e.recordNames(ctx, []string{p})
	}
	return err
}

// lookup returns the file at p, nil if the cache holds none.
func (e *Engine) lookup(p string) *file {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.files[p]
}

// Drop forgets every extent of path, dirty ones included (the file is gone),
// and its file record. It waits for in-flight write-back of the file.
func (e *Engine) Drop(ctx context.Context, p string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	f := e.lookup(p)
	if f == nil {
		return nil
	}
	f.wbmu.Lock()
	e.mu.Lock()
	doomed := f.doomed > 0
	e.mu.Unlock()
	e.dropLocked(f)
	f.wbmu.Unlock()
	if doomed {
		// The end of an unlink (see Doom): a crash before the next commit
		// finds the file doomed, and the restart drops it, since the
		// backing file is gone (dropRemovedDooms). Waiting here would cost
		// every unlink a second commit.
		e.kickCommit()
		return nil
	}
	// Durable step: the index without the file, as in Unlink.
	return e.waitCommit(ctx)
}

// dropLocked forgets f, whose wbmu the caller holds, and reports whether
// the cache held anything of it.
func (e *Engine) dropLocked(f *file) bool {
	e.mu.Lock()
	had := f.record || len(f.extents) > 0
	e.forgetFileLocked(f)
	e.mu.Unlock()
	e.dropExtents(f, func(*extent) bool { return true }, true)
	return had
}

// forgetFileLocked removes f from the engine; writers still holding it
// see it dead and stop.
func (e *Engine) forgetFileLocked(f *file) {
	f.dead = true
	if f.doomed > 0 {
		f.doomed, f.unlinks = 0, nil
		delete(e.dooms, f)
		e.cond.Broadcast()
	}
	if e.files[f.path] == f {
		delete(e.files, f.path)
	}
	e.sourceChangedLocked(f)
	if f.record {
		f.record = false
		if e.cfg.Share.counts(f.path) {
			e.nfile--
		}
		e.markFileLocked(f)
	}
}

// Rename renames oldPath to newPath on the backing store. Cached data is
// keyed by path and placed on servers by a hash of it, so it cannot follow a
// rename: both paths (files or whole trees) are flushed and dropped first.
// The new name, and the old one's removal, are made durable as
// NamesChanged says.
func (e *Engine) Rename(ctx context.Context, oldPath, newPath string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	for _, p := range []string{oldPath, newPath} {
		if err := e.flushAndDrop(ctx, p, dropRecords); err != nil {
			return fmt.Errorf("rename %q to %q: %w", oldPath, newPath, err)
		}
	}
	if err := e.backing.Rename(ctx, oldPath, newPath); err != nil {
		return err
	}
	e.attrsMoved(oldPath, newPath)
	return e.namesChanged(ctx, oldPath, newPath)
}

// FlushAndDrop writes back the dirty extents of a path, or of every file
// under a directory, then forgets them and their file records.
func (e *Engine) FlushAndDrop(ctx context.Context, pathOrDir string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.flushAndDrop(ctx, pathOrDir, dropRecords)
}

// FlushAndDropKeepingCounts is FlushAndDrop, but for the records that count
// against MaxFiles here: each is made afresh, forgetting the file's size and
// identity, and keeps its place. A client drops a path this way before a
// rename or link of it, which may fail and leave the file where it was;
// once the call succeeded, a FlushAndDrop gives the places back.
func (e *Engine) FlushAndDropKeepingCounts(ctx context.Context, pathOrDir string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.flushAndDrop(ctx, pathOrDir, keepCounted)
}

// recordDrop says what dropTree does with the records of the files it
// leaves without extents.
type recordDrop int

const (
	keepRecords recordDrop = iota // keeps them
	dropRecords                   // forgets them
	keepCounted                   // forgets them, but makes those counted here afresh
)

func (e *Engine) flushAndDrop(ctx context.Context, p string, records recordDrop) error {
	for {
		if err := e.flushTree(ctx, p); err != nil {
			return err
		}
		// Writes that raced with the flush left dirty extents: go again.
		if e.dropTree(p, records) == 0 {
			// Durable step: the index without the dropped extents. A crash
			// before it finds them again, dirty as of the last commit, and
			// write-back would write them to a path that a rename or unlink
			// after this call took away; after it, they stay gone.
			return e.waitCommit(ctx)
		}
	}
}

// FlushPath writes back the dirty extents of a path or of every file under
// a directory, blocking until they are clean, and that durably, and makes
// the names and attributes changed through the cache durable, as Flush
// does. It is a
// hint, not something a job's call waits for: while jobs do I/O, it yields
// to them as background write-back does.
func (e *Engine) FlushPath(ctx context.Context, pathOrDir string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if err := e.flushTreeYielding(ctx, pathOrDir, true); err != nil {
		return err
	}
	// Names changed through the cache are kept by directory, not by file:
	// all of them are made durable, which costs one fsync of each
	// directory that holds such a name, since the last flush, and so are
	// the attributes changed, one fsync of each file.
	if err := e.syncChanged(); err != nil {
		return err
	}
	// Durable step: the index calling the extents clean (rule 6).
	return flushedCommit(e.waitCommit(ctx))
}

// flushedCommit returns the error of the commit that ends a flush, but
// for the failure of the commit itself: the data is in the backing store,
// which is what a flush promises, and the failure shows in Stats.
func flushedCommit(err error) error {
	if errors.Is(err, errCommit) {
		return nil
	}
	return err
}

// EvictPath writes back, then drops the extents of a path or tree. The
// files' records stay, and with them the sizes the cache knows: a client
// that renames a path evicts it on every server before it has any drop
// the records, since the size a metadata server recorded may be all that
// tells of data another server still holds.
func (e *Engine) EvictPath(ctx context.Context, pathOrDir string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if err := e.flushTree(ctx, pathOrDir); err != nil {
		return err
	}
	e.dropTree(pathOrDir, keepRecords)
	// Durable step: the index without the dropped extents. A crash before
	// it finds them again, clean, and serves them until the next
	// invalidation; after it, the next read copies up again.
	return e.waitCommit(ctx)
}

// WriteOut writes the dirty data of a path, or of every file under a
// directory, to the backing files, and returns once every byte that was
// dirty when it was called is in them: those that a worker was writing
// back are waited for, those that wait only for the syncer's fsync are
// not. It drops nothing, and commits nothing: the extents stay dirty
// until the syncer fsyncs their files, as every write-back's (rule 6 of
// the package doc), so a crash before that leaves the index as the call
// found it, and what it names dirty is written back again. A caller that
// sets an explicit modification time on a backing file next sees it kept:
// a write to the file moves the time, while its fsync does not. Local file
// systems set the time at the write, not when its pages reach the disk
// (TestFsyncKeepsExplicitTimes checks the test's); the Linux NFS client
// sends a file's dirty pages before it sets a time on it (nfs_setattr).
// A backing file system whose client sent them only at the fsync, with
// the server's time, would move the time.
func (e *Engine) WriteOut(ctx context.Context, pathOrDir string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.writeTree(ctx, pathOrDir, (*extent).notOut, false)
}

// ForgetRemoved forgets what the cache saw of the backing file p, which an
// unlink just removed: its clean extents and its size there. Dirty data
// stays: it is the doomed file's, which the unlink's EndDoom ends, or that
// of a file created at p since, which must not be lost.
func (e *Engine) ForgetRemoved(ctx context.Context, p string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	f := e.lookup(p)
	if f == nil {
		return nil
	}
	f.wbmu.Lock()
	e.mu.Lock()
	had := len(f.extents)
	e.mu.Unlock()
	left := e.dropExtents(f, func(*extent) bool { return true }, false)
	e.mu.Lock()
	f.statted = false
	// A file made at p from now on is not the one whose name was durable.
	f.named = false
	e.mu.Unlock()
	f.wbmu.Unlock()
	if left == had {
		return nil
	}
	// Durable step: the index without the dropped extents. A crash before
	// it finds them again, and would serve them to a file created at p.
	return e.waitCommit(ctx)
}

// InvalidatePath drops the clean extents of a path or tree, and forgets the
// backing sizes seen, so that reads see changes made to the backing store
// behind the cache's back. Dirty extents stay, and so do the records of
// files, but for those of files removed from the backing store behind the
// cache's back (see forgetRemovedRecords).
func (e *Engine) InvalidatePath(ctx context.Context, pathOrDir string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	e.mu.Lock()
	for _, f := range e.filesUnderLocked(pathOrDir) {
		// A copier's open may name the file the caller wants forgotten:
		// read-ahead claimed from now on opens the backing file anew.
		f.copierStale = f.copier
	}
	e.mu.Unlock()
	e.dropTree(pathOrDir, keepRecords)
	e.mu.Lock()
	files := e.filesUnderLocked(pathOrDir)
	for _, f := range files {
		// The backing file may be another now, under a name, or in
		// directories, that nobody made durable (rule 8).
		f.statted, f.named = false, false
	}
	e.mu.Unlock()
	e.forgetRemovedRecords(ctx, files)
	// Durable step: the index without the dropped extents. A crash before
	// it finds them again and serves the bytes the caller asked to forget,
	// older than the backing file's; after it, reads copy up again.
	return e.waitCommit(ctx)
}

// forgetRemovedRecords forgets the records of the files that count
// against MaxFiles here, that the engine holds nothing else of, and whose
// backing file is gone, removed behind the cache's back: nothing else
// would give their places under MaxFiles back, since no remove through the
// cache will come for them, and creates would be refused for good once
// they filled the engine's part. A file with dirty extents, or under an
// unlink, keeps its record. A file created again at the path, through the
// cache, between the stat and the forgetting goes uncounted until it is
// removed.
func (e *Engine) forgetRemovedRecords(ctx context.Context, files []*file) {
	for _, f := range files {
		if !e.bareRecord(f) {
			continue
		}
		if _, err := e.backing.Stat(ctx, f.path); !errorsIsNotExist(err) {
			continue
		}
		e.mu.Lock()
		if e.files[f.path] == f && len(f.extents) == 0 && f.record && f.doomed == 0 {
			e.forgetFileLocked(f)
		}
		e.mu.Unlock()
	}
}

// bareRecord reports whether the engine holds of f a record that counts
// against MaxFiles and nothing else: only those are worth a stat of the
// backing file, which a large tree pays once per file.
func (e *Engine) bareRecord(f *file) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tun.MaxFiles > 0 && e.cfg.Share.counts(f.path) &&
		e.files[f.path] == f && f.record && len(f.extents) == 0 && f.doomed == 0
}

// dropTree drops the clean extents of the files under dir, and does with
// the records of those left without extents as records says. It returns
// how many dirty extents it left.
func (e *Engine) dropTree(dir string, records recordDrop) int {
	e.mu.Lock()
	fs := e.filesUnderLocked(dir)
	e.mu.Unlock()
	left := 0
	for _, f := range fs {
		f.wbmu.Lock()
		left += e.dropExtents(f, func(*extent) bool { return true }, false)
		e.mu.Lock()
		if records != keepRecords && len(f.extents) == 0 {
			counted := f.record && e.cfg.Share.counts(f.path)
			e.forgetFileLocked(f)
			if records == keepCounted && counted {
				// The place goes from the old record to the new one at
				// once, so that no create takes it meanwhile.
				e.recordLocked(e.fileLocked(f.path))
			}
		}
		e.mu.Unlock()
		f.wbmu.Unlock()
	}
	return left
}

// flushTree writes back, on the calling goroutine, every dirty extent under
// dir, retrying failures with backoff until an extent under dir failed
// flushGiveUp times in a row, and as many write-backs failed since the
// flush began.
func (e *Engine) flushTree(ctx context.Context, dir string) error {
	return e.flushTreeYielding(ctx, dir, false)
}

// flushTreeYielding is flushTree; with yield set, the write-back yields to
// jobs' I/O (see yieldToJobs), for flushes nobody blocks on.
func (e *Engine) flushTreeYielding(ctx context.Context, dir string, yield bool) error {
	return e.writeTree(ctx, dir, (*extent).dirty, yield)
}

// writeTree writes back the extents under dir that are pending, until none
// is left, as flushTreeYielding says. An extent that stops being pending
// only when the syncer counts it clean (dirty) makes it wait for the
// fsyncs; one that stops once its bytes are in the backing file (notOut)
// does not.
func (e *Engine) writeTree(ctx context.Context, dir string, pending func(*extent) bool, yield bool) error {
	e.mu.Lock()
	errs := e.st.wbErrors
	if !yield {
		e.beginUrgentLocked()
		defer func() {
			e.mu.Lock()
			e.urgent--
			e.mu.Unlock()
		}()
	}
	e.mu.Unlock()
	for {
		xs, busy, failed := e.dirtyUnder(dir, errs, pending)
		if failed != nil {
			return fmt.Errorf("flushing %q: %w", dir, e.dirtyLeft(failed))
		}
		if len(xs) == 0 && !busy {
			return nil
		}
		claimed := 0
		for _, x := range xs {
			if !e.claim(x) {
				continue
			}
			claimed++
			start := time.Now()
			// A failure is retried after the extent's backoff.
			_ = e.writeBack(x)
			if yield {
				e.yieldToJobs(time.Since(start))
			}
		}
		if claimed == 0 {
			// Workers and the syncer hold every dirty extent left, or
			// those left wait for their backoff: wait for them.
			if err := sleepCtx(ctx, time.Millisecond); err != nil {
				return fmt.Errorf("flushing %q: %w", dir, e.dirtyLeft(err))
			}
		}
	}
}

// dirtyUnder lists the pending extents under dir that nobody writes back
// and whose backoff is over, and reports whether others are left. failed
// is the last write-back error when an extent under dir failed flushGiveUp
// times in a row, and as many write-backs failed since the count was errs.
func (e *Engine) dirtyUnder(dir string, errs int64, pending func(*extent) bool) (xs []*extent, busy bool, failed error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for _, f := range e.filesUnderLocked(dir) {
		for _, x := range f.extents {
			if x.state != ready || !pending(x) {
				continue
			}
			if x.failures >= flushGiveUp && e.st.wbErrors-errs >= flushGiveUp {
				failed = e.st.lastWBErr
			}
			// A doomed file's extents wait for the doom to end.
			if x.wb || f.doomed > 0 || now.Before(x.retryAt) {
				busy = true
			} else {
				xs = append(xs, x)
			}
		}
	}
	return xs, busy, failed
}

// claim marks x as being written back, if it is dirty and nobody else is.
func (e *Engine) claim(x *extent) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x.wb || x.state != ready || !x.dirty() || x.f.doomed > 0 {
		return false
	}
	x.wb = true
	return true
}

func (e *Engine) dirtyLeft(cause error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dirtyLeftLocked(cause)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Preload copies up whole files: path itself, or every file under it when
// it is a directory.
func (e *Engine) Preload(ctx context.Context, p string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.preload(ctx, p)
}

func (e *Engine) preload(ctx context.Context, p string) error {
	fi, err := e.backing.Stat(ctx, p)
	if err != nil {
		return fmt.Errorf("preloading %q: %w", p, err)
	}
	if !fi.IsDir() {
		return e.preloadFile(ctx, p)
	}
	des, err := e.backing.ReadDir(ctx, p)
	if err != nil {
		return fmt.Errorf("preloading %q: %w", p, err)
	}
	for _, de := range des {
		if err := e.preload(ctx, path.Join(p, de.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) preloadFile(ctx context.Context, p string) error {
	f, err := e.statFile(ctx, p)
	if err != nil || e.passThrough(f) {
		return err
	}
	size := e.knownSize(f)
	for idx := int64(0); idx*e.es < size; idx++ {
		if err := e.readExtent(ctx, f, idx, nil, 0); err != nil {
			return fmt.Errorf("preloading %q: %w", p, err)
		}
	}
	return nil
}
