package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/burstcache/burstcache/cacheserver/index"
)

// markExtLocked queues the index entry of x for the next commit.
func (e *Engine) markExtLocked(x *extent) { e.idxExt[x.key()] = struct{}{} }

// markFileLocked queues the file record of f for the next commit.
func (e *Engine) markFileLocked(f *file) { e.idxFile[f.path] = struct{}{} }

// freeSlotLocked retires a slot that an index entry may still name: it
// becomes reusable only after the commit that forgets that entry is durable,
// or a crash could leave the old entry pointing at new data.
//
// Only a writer waiting for space hurries the commit along. Otherwise the
// slots freed together (a file dropped, evicted or truncated) wait for one
// commit and come back on the free list together, in order, so that files
// take them in runs (slotRun); a commit kicked at each slot took a few at a
// time, and the free list came back in pieces of random order.
func (e *Engine) freeSlotLocked(slot int32) {
	e.gens.bump(slot)
	e.pendingFree = append(e.pendingFree, slot)
	if e.spaceWaiters > 0 {
		e.kickCommit()
	}
}

func (e *Engine) kickCommit() {
	select {
	case e.commitKick <- struct{}{}:
	default:
	}
}

// committer is the single group committer of the index. It commits when
// kicked (Sync, freed slots) and at least every CommitInterval while changes
// wait, so that a crash loses at most that much of the writes no fsync
// covered.
func (e *Engine) committer() {
	defer e.wg.Done()
	tick := time.NewTicker(e.cfg.CommitInterval)
	defer tick.Stop()
	// failing is the error of the latest commit: a failure that stays the
	// same, such as a full cache disk, is logged once, not every second.
	var failing error
	for {
		select {
		case <-e.stop:
			return
		case <-e.commitKick:
		case <-tick.C:
			if !e.commitPending() {
				continue
			}
			e.wantChanges()
		}
		err := e.commitOnce()
		switch {
		case errors.Is(err, ErrCacheDevice):
		case err != nil && (failing == nil || err.Error() != failing.Error()):
			e.log.Error("Committing the cache index failed; retrying", "err", err)
		case err == nil && failing != nil:
			e.log.Info("Committing the cache index works again", "failedBefore", failing)
		}
		failing = err
	}
}

// wantChanges has the next commit write the queued change records, even
// with nothing else to commit: the committer's within CommitInterval, a
// Sync's, Close's. Other commits write them only along with extents or
// files, as a commit of them alone costs an fsync of the index, and calls
// that wait for a commit to make something else durable (a drop before a
// rename) found nothing to write before.
func (e *Engine) wantChanges() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.changesWanted = true
}

// commitPending reports whether index changes wait for a commit.
func (e *Engine) commitPending() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.idxExt) > 0 || len(e.idxFile) > 0 || len(e.idxChange) > 0 || len(e.idxSource) > 0 || len(e.pendingFree) > 0
}

// commitOnce commits every index change made so far, in one transaction.
func (e *Engine) commitOnce() error {
	e.mu.Lock()
	e.commitStarted++
	seq := e.commitStarted
	batch, keys, files := e.batchLocked()
	freeing := e.pendingFree
	e.pendingFree = nil
	e.mu.Unlock()

	err := e.commitBatch(batch)

	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		// Nothing of the batch is durable: queue it again, keep the slots.
		for _, k := range keys {
			e.idxExt[k] = struct{}{}
		}
		for _, p := range files {
			e.idxFile[p] = struct{}{}
		}
		for c := range batch.Changes {
			e.idxChange[c] = struct{}{}
		}
		for p := range batch.Sources {
			e.idxSource[p] = struct{}{}
		}
		e.pendingFree = append(e.pendingFree, freeing...)
		e.st.commitFailures++
	} else {
		e.reuseLocked(freeing)
		e.changesCommittedLocked(batch.Changes)
		for k, x := range batch.Extents {
			if x != nil && committedDirty(*x) {
				e.durableDirty[k] = int32(x.Slot)
			} else {
				delete(e.durableDirty, k)
			}
		}
	}
	e.commitErr = err
	e.commitDone = seq
	e.cond.Broadcast()
	return err
}

// commitBatch makes batch durable.
func (e *Engine) commitBatch(b index.Batch) error {
	if len(b.Extents) == 0 && len(b.Files) == 0 && len(b.Changes) == 0 && len(b.Sources) == 0 {
		return nil
	}
	e.mu.Lock()
	failed := e.deviceErr
	e.mu.Unlock()
	if failed != nil {
		return failed
	}
	if len(b.Extents) == 0 && len(b.Files) == 0 {
		// Change and source records name no slot: the slab holds nothing
		// they need.
		return e.idx.Commit(b)
	}
	// Durable step 1: fdatasync the slab. Every entry in the batch names a
	// slot whose data was written before the entry was queued, so after this
	// the data the batch refers to is on disk. A crash here leaves the index
	// as of the previous commit: new slots are unreferenced (free on
	// recovery), and dirty extents written in place are recovered as dirty
	// over their whole valid range.
	if err := e.slab.Sync(); err != nil {
		// The pages that failed may be gone from memory as if written,
		// and the next fdatasync would not say so: trust no commit from
		// now on (ErrCacheDevice).
		err = fmt.Errorf("%w: fdatasync of the slab: %w", ErrCacheDevice, err)
		e.mu.Lock()
		e.deviceErr = err
		e.mu.Unlock()
		e.log.Error("The cache device failed: refusing writes and commits, writing back what is dirty", "err", err)
		return err
	}
	// Durable step 2: the bbolt transaction (see index.DB.Commit). A crash
	// before it completes leaves the previous index; after it, the batch.
	return e.idx.Commit(b)
}

// committedDirty reports whether an index entry makes its extent dirty
// when the engine opens: a dirty range over data.
func committedDirty(r index.Extent) bool { return r.DirtyHi > r.DirtyLo && r.Valid > 0 }

// batchLocked serialises the queued changes from the current in-memory state.
func (e *Engine) batchLocked() (index.Batch, []index.Key, []string) {
	b := index.Batch{Extents: map[index.Key]*index.Extent{}, Files: map[string]*index.File{}}
	keys := make([]index.Key, 0, len(e.idxExt))
	for k := range e.idxExt {
		keys = append(keys, k)
		b.Extents[k] = e.entryLocked(k)
	}
	files := make([]string, 0, len(e.idxFile))
	for p := range e.idxFile {
		files = append(files, p)
		if f := e.files[p]; f != nil && f.record {
			b.Files[p] = &index.File{Size: f.size, Cred: f.cred, Dooms: uint32(f.doomed),
				DoomedIno: f.doomedID.Ino, DoomedBirth: f.doomedID.Birth, DoomedGen: f.doomedID.Gen, Unlinks: slices.Clone(f.unlinks)}
		} else {
			b.Files[p] = nil
		}
	}
	if len(b.Extents) > 0 || len(b.Files) > 0 || e.changesWanted {
		b.Changes = e.changesLocked()
		e.changesWanted = false
	}
	b.Sources = e.sourcesLocked()
	clear(e.idxExt)
	clear(e.idxFile)
	return b, keys, files
}

// changesLocked serialises the queued change records (rule 8 of the
// package doc): those still waiting for an fsync are put, the others
// deleted.
func (e *Engine) changesLocked() map[index.Change]*index.ChangeRecord {
	if len(e.idxChange) == 0 {
		return nil
	}
	b := make(map[index.Change]*index.ChangeRecord, len(e.idxChange))
	for c := range e.idxChange {
		if ch, ok := e.changedLocked(c.Kind)[c.Path]; ok {
			b[c] = &index.ChangeRecord{Cred: ch.cred}
		} else if _, ok := e.changesStored[c]; ok {
			b[c] = nil
		}
		// A change fsynced before any commit recorded it, as with
		// Durability Backing at the call, costs the index nothing.
	}
	clear(e.idxChange)
	return b
}

// changesCommittedLocked notes which change records the index holds once
// changes were committed. A record written for a change that an fsync
// made durable while the commit ran, and that the batch after it skipped
// as never stored, is queued again for deletion.
func (e *Engine) changesCommittedLocked(changes map[index.Change]*index.ChangeRecord) {
	for c, r := range changes {
		if r == nil {
			delete(e.changesStored, c)
			continue
		}
		e.changesStored[c] = struct{}{}
		if _, ok := e.changedLocked(c.Kind)[c.Path]; !ok {
			e.idxChange[c] = struct{}{}
		}
	}
}

// entryLocked returns the index entry of k, or nil when it has none.
func (e *Engine) entryLocked(k index.Key) *index.Extent {
	f := e.files[k.Path]
	if f == nil {
		return nil
	}
	x := f.extents[k.Index]
	if x == nil || x.state != ready {
		return nil
	}
	return &index.Extent{Slot: uint32(x.slot), Valid: uint32(x.valid),
		DirtyLo: uint32(x.lo), DirtyHi: uint32(x.hi), LastWrite: x.lastWrite.UnixNano()}
}

// waitCommit makes every change made before the call durable.
func (e *Engine) waitCommit(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.waitCommitLocked(ctx)
}

// waitCommitLocked is waitCommit with e.mu held.
func (e *Engine) waitCommitLocked(ctx context.Context) error {
	target := e.commitStarted + 1
	e.kickCommit()
	for e.commitDone < target {
		if e.closed && e.active == 0 {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		e.cond.Wait()
	}
	if e.commitErr != nil {
		return errors.Join(errCommit, e.commitErr)
	}
	return nil
}

var errCommit = errors.New("committing cache index")
