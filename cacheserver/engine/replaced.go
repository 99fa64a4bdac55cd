package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/index"
)

type readingKey struct{}

// ReadingFile marks ctx for a read through an open of the backing file id,
// as the open found it on the backing store: the cached extents of the
// path serve the read only if they were copied from that file, or from one
// that replaced it later. Extents of another file, which the backing store
// replaced under the same name behind the cache (a new file renamed over
// the old one, or the old one removed and a new one created), are dropped
// first and the read copies up the new file's bytes, as NFS's
// close-to-open consistency gives a file opened after the replacement.
// A zero id (Ino 0) names no file, and the read is served as one without
// the mark.
//
// The same goes for a file that the backing store changed in place (cp
// over it, a job elsewhere writing it): extents copied from the file
// before its change time moved past the one the read names are dropped
// too. Not those of a file written through the cache: its write-backs
// move the change time (and those of the other servers that hold its
// extents), so the engine keeps no version of a file it took writes or a
// size of (ExtendSize) until it holds neither extents nor a size.
//
// Writes may be marked too: a write then lands in the bytes of the file it
// names, not in cached bytes of the file that one replaced.
//
// The engine records the identity of the file its extents come from: the
// first identity a call names while it holds none of the file, since the
// copies that follow read that file or one that replaced it since, and
// the writes that follow are that file's. The index keeps it across a
// restart. A call that names another identity costs one look at the
// backing store (backing.IDOf); the answer is remembered, so that readers
// of an old open, which may go on reading after the replacement, ask no
// more. A file with dirty extents keeps them all (they are written back
// to whatever file the path names), and its clean ones too, until it has
// no dirty extent left. Extents whose source the engine does not know,
// those written by callers that named no file and those a restart found
// with no record of their source, are taken for the file that the backing
// store holds when a call first names one. The size that writes through
// the cache gave the path goes with the replaced file's extents.
func ReadingFile(ctx context.Context, id backing.FileID) context.Context {
	if id.Ino == 0 {
		return ctx
	}
	return context.WithValue(ctx, readingKey{}, id)
}

// readingFile returns the identity that ReadingFile put in ctx.
func readingFile(ctx context.Context) (backing.FileID, bool) {
	id, ok := ctx.Value(readingKey{}).(backing.FileID)
	return id, ok
}

// maxNotSource bounds the identities a file remembers as replaced: a
// reader that names one it forgot asks the backing store once more.
const maxNotSource = 4

// verdict is what a read that names a backing file does with the cached
// extents of the path.
type verdict int

const (
	serve    verdict = iota // the extents are of the named file, or newer
	dropThem                // the named file replaced them: drop them
	askStore                // ask the backing store which file the path names
)

// unlessReplaced returns f, after dropping its clean extents when the read
// of ctx names a backing file that replaced the one they came from.
func (e *Engine) unlessReplaced(ctx context.Context, f *file) (*file, error) {
	named, ok := readingFile(ctx)
	if !ok {
		return f, nil
	}
	e.mu.Lock()
	v := e.judgeLocked(f, named)
	e.mu.Unlock()
	if v == askStore {
		var err error
		if v, err = e.askStore(ctx, f, named); err != nil {
			return nil, err
		}
	}
	if v != dropThem || !e.dropReplaced(f, named) {
		return f, nil
	}
	// Durable step: the index without the dropped extents. A crash before
	// it finds them again, of a source unknown then, and would take them
	// for the new file's.
	if err := e.waitCommit(ctx); err != nil {
		return nil, err
	}
	// The size seen was the old file's.
	return e.statFile(ctx, f.path)
}

// judgeLocked says what a read that names the backing file named does
// with the extents of f, as far as the engine knows without asking.
func (e *Engine) judgeLocked(f *file, named backing.FileID) verdict {
	same := func(id backing.FileID) bool { return !named.Other(id) }
	switch {
	case f.shared:
		// Its I/O passes through to the backing file.
		return serve
	case len(f.extents) == 0:
		// Copy-ups from now on read the named file, or one that replaced
		// it since; a copier's open may be of an older one.
		f.replacedBy, f.notSource, f.blind = backing.FileID{}, nil, false
		f.copierStale = f.copier
		e.takeSourceLocked(f, named)
		return serve
	case f.source.Ino != 0 && same(f.source):
		if named.ChangedSince(f.source) {
			// Changed in place since the extents were copied from it.
			return dropThem
		}
		return serve
	case slices.ContainsFunc(f.notSource, same):
		return serve
	case f.replacedBy.Ino != 0 && same(f.replacedBy):
		if e.hasDirtyLocked(f) {
			return serve
		}
		return dropThem
	}
	return askStore
}

// askStore looks at the backing file of f to tell whether named is the
// file the path names now, and remembers the answer: if it is not, the
// named file was replaced, and f's extents, of that file or a later one,
// serve its reader as they did before; if it is, and f's source is
// unknown, the extents are taken for its own.
func (e *Engine) askStore(ctx context.Context, f *file, named backing.FileID) (verdict, error) {
	now, err := backing.IDOf(ctx, e.backing, f.path)
	if err != nil && !errorsIsNotExist(err) {
		return serve, fmt.Errorf("checking whether %s was replaced: %w", f.path, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case err != nil || named.Other(now):
		f.replacedLocked(named)
		return serve, nil
	case f.source.Ino == 0 && !f.blind:
		// Extents of unknown source may have been written through the
		// cache: of unknown version too (writtenLocked).
		f.source = now
		f.source.Change = 0
		e.sourceChangedLocked(f)
		return serve, nil
	case e.hasDirtyLocked(f):
		f.replacedBy = named
		return serve, nil
	}
	return dropThem, nil
}

// learnSource learns the identity of f's backing file from the backing
// store before a copy-up of a read that names none (a client of an
// earlier release, a preload), when f has no extents: the copy reads
// that file or one that replaced it since.
func (e *Engine) learnSource(ctx context.Context, f *file) {
	if _, named := readingFile(ctx); named {
		return
	}
	e.mu.Lock()
	unknown := f.source.Ino == 0 && len(f.extents) == 0 && !f.shared
	e.mu.Unlock()
	if !unknown {
		return
	}
	id, err := backing.IDOf(ctx, e.backing, f.path)
	e.mu.Lock()
	defer e.mu.Unlock()
	// Extents placed during the look may be of an older file.
	if err == nil && f.source.Ino == 0 && len(f.extents) == 0 {
		f.blind = false
		e.takeSourceLocked(f, id)
	}
}

// takeSourceLocked makes id the source of the extents f copies from now
// on. It is of no version while writes through the cache gave f a size,
// here or on another server: their write-back moves the change time, and
// a drop would forget the size, whose end another server may hold dirty
// yet (see writtenLocked).
func (e *Engine) takeSourceLocked(f *file, id backing.FileID) {
	f.source = id
	if f.size != 0 {
		f.source.Change = 0
	}
	e.sourceChangedLocked(f)
}

// writtenLocked notes that a write through the cache made an extent of f
// dirty, or gave f a size: its extents are of no version of the backing
// file any more, and the backing file's change time, which its write-back
// moves (and other servers' write-backs of the file), says nothing of
// them. A file written through the cache is told changed in place no more
// until it has neither extents nor a size left.
func (e *Engine) writtenLocked(f *file) {
	if f.source.Change != 0 {
		f.source.Change = 0
		e.sourceChangedLocked(f)
	}
}

// copyingLocked notes a copy-up into f: one made while its source is
// unknown may copy any file the path names.
func (f *file) copyingLocked() {
	if f.source.Ino == 0 {
		f.blind = true
	}
}

// hasDirtyLocked reports whether f holds dirty extents, without going
// through them: a read of a file that waits for its dirty extents to be
// written back asks at every call.
func (e *Engine) hasDirtyLocked(f *file) bool { return f.dirtyExtents > 0 }

// dropReplaced drops the clean extents of f, whose backing file named
// replaced the one they came from, or is a later version of it, as
// InvalidatePath does, and reports whether it did. Dirty extents that a
// write made meanwhile stay, and so does the clean data with them: the
// drop is tried again at a later read of named, once they are written
// back.
func (e *Engine) dropReplaced(f *file, named backing.FileID) bool {
	e.mu.Lock()
	// The copier's open may be of the replaced file.
	f.copierStale = f.copier
	e.mu.Unlock()
	f.wbmu.Lock()
	defer f.wbmu.Unlock()
	e.mu.Lock()
	dirty := e.hasDirtyLocked(f)
	e.mu.Unlock()
	if dirty || e.dropExtents(f, func(*extent) bool { return true }, false) > 0 {
		e.mu.Lock()
		f.replacedBy = named
		e.mu.Unlock()
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f.source.Ino != 0 {
		f.replacedLocked(f.source)
	}
	f.source, f.replacedBy, f.blind = named, backing.FileID{}, false
	e.sourceChangedLocked(f)
	// The size writes through the cache gave the path is the replaced
	// file's (those of other servers' dirty data, if any, come back as
	// their write-back extends the new file). A file changed in place
	// has none: it is of no version while it has one (judgeLocked).
	e.forgetSizeLocked(f)
	f.statted = false
	e.st.replaced++
	return true
}

// replacedLocked remembers that the backing file id is no longer the one
// the path names.
func (f *file) replacedLocked(id backing.FileID) {
	f.notSource = append(f.notSource, id)
	if len(f.notSource) > maxNotSource {
		f.notSource = f.notSource[1:]
	}
}

// durableSourceLocked returns the source of f that the index is to hold:
// its known source while it holds extents, none otherwise.
func durableSourceLocked(f *file) backing.FileID {
	if f == nil || f.dead || f.shared || f.blind || len(f.extents) == 0 {
		return backing.FileID{}
	}
	return f.source
}

// sourceChangedLocked queues the source record of f for the next commit
// when what the index is to hold of it changed: its source, its blindness,
// or whether it holds extents. The record goes in the commit that takes
// f's first extent, or an earlier one, so a restart never finds extents
// of a file under the source of the one before.
func (e *Engine) sourceChangedLocked(f *file) {
	if durableSourceLocked(f) != f.sourceRecord {
		e.idxSource[f.path] = struct{}{}
	}
}

// sourcesLocked serialises the queued source records: a known source is
// put, no source deleted.
func (e *Engine) sourcesLocked() map[string]*index.Source {
	if len(e.idxSource) == 0 {
		return nil
	}
	b := make(map[string]*index.Source, len(e.idxSource))
	for p := range e.idxSource {
		f := e.files[p]
		id := durableSourceLocked(f)
		if f != nil {
			f.sourceRecord = id
		}
		b[p] = nil
		if id.Ino != 0 {
			b[p] = &index.Source{Ino: id.Ino, Birth: id.Birth, Gen: id.Gen, Change: id.Change}
		}
	}
	clear(e.idxSource)
	return b
}

// recoverSource gives the file at p the source its record names, if the
// restarted engine found extents of it; the records of others go.
func (e *Engine) recoverSource(p string, r index.Source) error {
	f := e.files[p]
	if f == nil || len(f.extents) == 0 {
		e.idxSource[p] = struct{}{}
		return nil
	}
	f.source = backing.FileID{Ino: r.Ino, Birth: r.Birth, Gen: r.Gen, Change: r.Change}
	f.sourceRecord = f.source
	written := f.size != 0
	for _, x := range f.extents {
		written = written || x.dirty()
	}
	if written && f.source.Change != 0 {
		// Of no version (writtenLocked).
		f.source.Change = 0
		e.sourceChangedLocked(f)
	}
	return nil
}
