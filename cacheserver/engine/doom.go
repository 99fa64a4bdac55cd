package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
)

// Doom begins an unlink of path, before the caller removes it from the
// backing store. The cache cannot forget the file's dirty data first (the
// removal may fail, and the file would lose what the job wrote), nor after
// (a crash in between would find the data again, and write-back would bring
// the removed file back). A doomed file keeps its data but none of it is
// written back, durably so: the doom is committed before Doom returns. The
// caller ends the doom with EndDoom, saying how its removal ended. A doom
// nobody ends, because the caller died, ends after DoomTimeout as the
// backing store says: the data is dropped if the file is gone there, and
// kept otherwise. A file created since under the same name is another file,
// told apart by the identity that the doom records (backing.FileID): the
// unlink removed the doomed one. A restart finds dooms in the index: it
// drops the files gone from the backing store at once (dropRemovedDooms),
// and gives the others DoomTimeout again, for the callers still under way.
//
// Each unlink names its doom with an id of its own (unlink, not 0), which
// EndDoom takes: a caller that does not know whether its Doom or EndDoom
// arrived (the answer got lost) can send the EndDoom again, and it ends
// that unlink's doom once, whatever other unlinks of the file do. A Doom
// with an id that already holds the file changes nothing.
//
// A caller whose Doom got no answer (its connection broke) ends it with
// NotRemoved, and that end may come first, while the Doom still waits
// (for write-back of the file under way, say). The Doom then begins
// nothing: the unlink it belongs to is over, and failed.
//
// A file with nothing the backing store lacks (no record: only clean
// extents) is dropped at once instead. Doom reports whether it kept the
// file doomed.
func (e *Engine) Doom(ctx context.Context, p string, unlink uint64) (doomed bool, err error) {
	if err := e.enter(); err != nil {
		return false, err
	}
	defer e.leave()
	e.mu.Lock()
	f := e.files[p]
	record := f != nil && f.record
	e.mu.Unlock()
	if f == nil {
		return false, nil
	}
	var id backing.FileID
	if record {
		// Which file the unlink removes, for a doom that ends without its
		// caller: a file created since under the same name is not it.
		id, _ = backing.IDOf(ctx, e.backing, p)
	}
	// Holding wbmu waits for write-back of the file under way; write-back
	// that starts later sees the doom (writeBack).
	f.wbmu.Lock()
	e.mu.Lock()
	if e.overtakenLocked(p, unlink) {
		e.mu.Unlock()
		f.wbmu.Unlock()
		return false, nil
	}
	keep := f.record && !f.dead
	if keep && (unlink == 0 || !slices.Contains(f.unlinks, unlink)) {
		if f.doomed == 0 {
			f.doomedAt, f.doomedID = e.cfg.Clock.Now(), id
			e.dooms[f] = struct{}{}
		}
		f.doomed++
		if unlink != 0 {
			f.unlinks = append(f.unlinks, unlink)
		}
		e.markFileLocked(f)
	}
	e.mu.Unlock()
	if !keep {
		e.dropLocked(f)
	}
	f.wbmu.Unlock()
	// Durable step: the doom, or the drop. A crash before it leaves the
	// file as it was, which the unlink has not touched yet.
	return keep, e.waitCommit(ctx)
}

// Unlinked says how the removal of a doomed file from the backing store
// ended, for EndDoom.
type Unlinked int

const (
	// Removed means the backing file is gone, and its data goes with it.
	Removed Unlinked = iota
	// NotRemoved means the removal failed, or was never asked for: the
	// data stays, and is written back once no other unlink holds the file.
	NotRemoved
	// MaybeRemoved means the caller cannot tell (the removal failed after
	// trying, or its answer got lost): the backing store says, as when a
	// doom times out.
	MaybeRemoved
)

// EndDoom ends the doom of path that the unlink with id unlink began with
// Doom, as its removal ended (how). It acts on that doom only, and once: a
// file whose doom ended meanwhile (another unlink of it dropped it, and a
// file created since may hold new data at the path) or that this unlink
// does not hold is left as it is. A MaybeRemoved that the backing store
// cannot answer for keeps the doom, which ends after DoomTimeout, and
// returns the error.
func (e *Engine) EndDoom(ctx context.Context, p string, unlink uint64, how Unlinked) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	e.mu.Lock()
	f := e.files[p]
	held := func() bool { return f.doomed > 0 && !f.dead && unlink != 0 && slices.Contains(f.unlinks, unlink) }
	ours := f != nil && held()
	if !ours && how == NotRemoved && unlink != 0 {
		// The Doom may still come (see Doom). Only a NotRemoved end can
		// overtake it: callers end with the others only dooms whose
		// answer they got.
		e.overtaken[unlinkKey{p, unlink}] = e.cfg.Clock.Now()
	}
	e.mu.Unlock()
	if !ours {
		return nil
	}
	gone := how == Removed
	if how == MaybeRemoved {
		var err error
		gone, _, err = e.goneFromBacking(ctx, f)
		if err != nil && !gone {
			return fmt.Errorf("cannot tell whether %s is gone from the backing store; it stays doomed: %w", p, err)
		}
	}
	if gone {
		// Committed with the next commit: a crash before it finds the
		// doom again, and the file still gone, which the restart drops.
		e.dropDoomed(f, held)
		return nil
	}
	e.mu.Lock()
	if held() {
		f.doomed--
		f.unlinks = slices.DeleteFunc(f.unlinks, func(u uint64) bool { return u == unlink })
		e.markFileLocked(f)
		e.endDoomLocked(f)
	}
	e.mu.Unlock()
	// Durable step: the end of the doom, or one unlink fewer holding it. A
	// crash before it finds the unlink's doom again: the file's
	// write-back (and flushes and renames of it) waits until the caller
	// sends its end again, or for DoomTimeout.
	return e.waitCommit(ctx)
}

// HoldDoom restarts the timeout of a doom of path: the unlink that doomed
// it is still under way. A removal on the backing store can take longer
// than DoomTimeout (a metadata server failing over); were the doom to time
// out meanwhile, it would find the file still there and write it back, and
// the late removal would leave a file that write-back brings back. The
// caller holds the doom at intervals well under DoomTimeout for as long as
// its unlink lasts. Nothing is committed: a restart gives every doom it
// finds DoomTimeout anyway.
func (e *Engine) HoldDoom(_ context.Context, p string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	e.mu.Lock()
	if f := e.files[p]; f != nil && f.doomed > 0 {
		f.doomedAt = e.cfg.Clock.Now()
	}
	e.mu.Unlock()
	return nil
}

// endDoomLocked lets write-back of f resume if no doom holds it, and
// wakes the changes of its path that waited for the doom (awaitUnlink).
func (e *Engine) endDoomLocked(f *file) {
	if f.doomed > 0 {
		return
	}
	f.doomedID, f.unlinks = backing.FileID{}, nil
	delete(e.dooms, f)
	e.markFileLocked(f)
	e.kickWriteBackLocked()
	e.cond.Broadcast()
}

// awaitUnlink waits while an unlink holds path doomed, before a write or
// a change of size of path. Between the removal of the backing file and
// the EndDoom that drops the file, another client may create the file
// again and write to it: those writes must go to a new file, not into the
// doomed one, whose data the drop forgets. So a change that finds path
// doomed waits for the doom to end, and then goes to the file that is
// there: a new one after a drop, the old one when it stays. A doom lasts the
// round trips of an unlink, or DoomTimeout when its client died.
func (e *Engine) awaitUnlink(ctx context.Context, path string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if f := e.files[path]; f == nil || f.doomed == 0 {
			return nil
		}
		if err := e.waitCtxLocked(ctx); err != nil {
			return fmt.Errorf("waiting for the unlink of %s: %w", path, err)
		}
	}
}

// unlinkKey names the doom of one unlink of a path.
type unlinkKey struct {
	path   string
	unlink uint64
}

// overtakenLocked reports whether the end of the unlink came before this
// Doom of it, and forgets that it did.
func (e *Engine) overtakenLocked(p string, unlink uint64) bool {
	if unlink == 0 {
		return false
	}
	k := unlinkKey{p, unlink}
	if _, ok := e.overtaken[k]; !ok {
		return false
	}
	delete(e.overtaken, k)
	return true
}

// forgetOvertakenLocked forgets the ends that came before their Doom more
// than DoomTimeout ago: a Doom that late begins a doom, which ends after
// DoomTimeout, as the backing store says.
func (e *Engine) forgetOvertakenLocked() {
	now := e.cfg.Clock.Now()
	for k, at := range e.overtaken {
		if now.Sub(at) >= e.cfg.DoomTimeout {
			delete(e.overtaken, k)
		}
	}
}

// oldDoomsLocked returns the doomed files whose doom is older than
// DoomTimeout.
func (e *Engine) oldDoomsLocked() []*file {
	now := e.cfg.Clock.Now()
	var old []*file
	for f := range e.dooms {
		if now.Sub(f.doomedAt) >= e.cfg.DoomTimeout {
			old = append(old, f)
		}
	}
	return old
}

// resolveDoom ends the doom of f, which timed out, as the backing store
// says: a file gone there is dropped, one still there (or that cannot be
// looked at) keeps its data and is written back.
func (e *Engine) resolveDoom(f *file) {
	gone, id, err := e.goneFromBacking(context.Background(), f)
	if gone {
		if e.dropDoomed(f, e.doomOf(f, id)) {
			e.log.Warn("Dropped the data of a file whose unlink did not end: it is gone from the backing store", "path", f.path)
		}
		return
	}
	f.wbmu.Lock()
	e.mu.Lock()
	still := e.doomOf(f, id)()
	if still {
		f.doomed = 0
		e.endDoomLocked(f)
	}
	e.mu.Unlock()
	f.wbmu.Unlock()
	if still {
		e.log.Warn("Keeping the data of a file whose unlink did not end: it is still on the backing store", "path", f.path, "err", err)
	}
}

// doomCheckTimeout bounds how long Open asks the backing store about the
// files that a restart found doomed.
const doomCheckTimeout = 10 * time.Second

// dropRemovedDooms drops, before Open returns, the files that the restart
// found doomed and whose backing files are gone. Their unlinks removed
// them: the EndDoom that dropped the file came before the crash, which did
// not wait for its commit, or is still to come. Waiting for
// DoomTimeout instead, as for a file still there, would let a file that a
// job creates at the path meanwhile have the old data written back into
// it, since the timeout would find a file there and keep the data. A file
// still there, or that the backing store does not answer for in time,
// keeps its doom for the unlink under way.
func (e *Engine) dropRemovedDooms() {
	e.mu.Lock()
	var doomed []*file
	for f := range e.dooms {
		doomed = append(doomed, f)
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), doomCheckTimeout)
	defer cancel()
	for _, f := range doomed {
		if gone, id, _ := e.goneFromBacking(ctx, f); gone && e.dropDoomed(f, e.doomOf(f, id)) {
			e.log.Info("Dropped the data of a file that an unlink removed before the restart", "path", f.path)
		}
	}
}

// goneFromBacking reports whether the backing file that the doom of f is
// about is gone: its name is, or names another file, created since. It
// returns the identity it judged by, that of the doomed file, for
// dropDoomed. It asks as the identity of the file's last writer, and
// returns the error of asking otherwise.
func (e *Engine) goneFromBacking(ctx context.Context, f *file) (gone bool, doomed backing.FileID, err error) {
	e.mu.Lock()
	if f.cred != nil {
		ctx = ident.NewContext(ctx, *f.cred)
	}
	doomed = f.doomedID
	e.mu.Unlock()
	id, err := backing.IDOf(ctx, e.backing, f.path)
	if err != nil {
		return errorsIsNotExist(err), doomed, err
	}
	return doomed.Ino != 0 && doomed.Other(id), doomed, nil
}

// doomOf returns whether the doom of the backing file with identity id
// still holds f, for dropDoomed.
func (e *Engine) doomOf(f *file, id backing.FileID) func() bool {
	return func() bool { return f.doomed > 0 && !f.dead && f.doomedID == id }
}

// dropDoomed drops f if the doom it was judged under still holds it (held,
// which runs under e.mu), and reports whether it did. The drop is committed
// with the next commit: a crash before it finds the doom again, and the
// file still gone.
func (e *Engine) dropDoomed(f *file, held func() bool) bool {
	f.wbmu.Lock()
	defer f.wbmu.Unlock()
	e.mu.Lock()
	still := held()
	e.mu.Unlock()
	if still {
		e.dropLocked(f)
		e.kickCommit()
	}
	return still
}
