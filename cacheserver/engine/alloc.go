package engine

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// errNoRoom: a copy-up found no slot, and none will be free until the
// backing store takes the dirty data it refuses.
var errNoRoom = errors.New("no room in the cache: every slot holds data the backing store refuses")

// refusingLocked reports whether no slot can be had until the backing
// store takes dirty data it refuses: none is free or clean, and write-back
// keeps failing with a refusal.
func (e *Engine) refusingLocked() bool {
	return e.used >= e.slab.Slots() && e.clean.n == 0 && e.failStreak >= flushGiveUp && refused(e.st.lastWBErr)
}

// refused reports whether err says that the backing store refuses all data
// until someone acts: it is full, over quota or read-only. (EFBIG refuses
// one file only: the writers of others must not get it.)
func refused(err error) bool {
	if errors.Is(err, errCommitFirst) {
		return false
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// allocSlot takes a free slot for extent idx of f, evicting clean extents
// or waiting for write-back and index commits when none is free. The
// caller must hold no extent lock: a writer that needs space that is all
// dirty waits here while write-back, which needs extent locks, cleans
// extents.
//
// When the backing store refuses the write-back of the dirty data
// (refused), waiting could last until an admin raises a quota. A write
// (write set, not Accepted) then gets the backing store's error, as it
// would have writing there directly; a read's copy-up gets errNoRoom, and
// its reader reads the backing file without caching it. The dirty data
// stays. Pages a client's kernel writes back (Accepted), which cannot be
// retried, go on waiting.
func (e *Engine) allocSlot(ctx context.Context, f *file, idx int64, write bool) (int32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	errs := e.st.wbErrors
	for {
		if s, ok := e.takeSlotLocked(f, idx); ok {
			return s, nil
		}
		// Write-back failed flushGiveUp times in a row, once at least
		// since this writer began to wait.
		if e.failStreak >= flushGiveUp && e.st.wbErrors > errs && refused(e.st.lastWBErr) {
			switch {
			case !write:
				return -1, fmt.Errorf("%w: %w", errNoRoom, e.st.lastWBErr)
			case !accepted(ctx):
				return -1, fmt.Errorf("waiting for free space: all of it holds data the backing store refuses: %w", e.st.lastWBErr)
			}
		}
		if e.commitErr != nil && len(e.pendingFree) > 0 {
			// Slots wait for a commit that fails: the cache device is
			// full (ENOSPC) or broken, and waiting could hang the writer
			// forever. It gets the error; writes succeed again once a
			// commit does.
			return -1, fmt.Errorf("waiting for free space: %w", e.commitErr)
		}
		if len(e.pendingFree) < e.spaceWaiters+1 && !e.evictOneLocked() {
			e.kickWriteBackLocked()
		}
		e.kickCommit()
		e.spaceWaiters++
		err := e.waitCtxLocked(ctx)
		e.spaceWaiters--
		if err != nil {
			return -1, err
		}
	}
}

// takeSlotLocked takes a free slot for extent idx of f, if there is one,
// without waiting.
func (e *Engine) takeSlotLocked(f *file, idx int64) (int32, bool) {
	for {
		s, ok := e.takeFromRunLocked(f, idx)
		if !ok {
			if s, ok = e.free.pop(); ok {
				e.reserveRunLocked(f, idx, s)
			}
		}
		if ok {
			e.used++
			e.evictToWatermarkLocked()
			return s, true
		}
		if !e.releaseRunsLocked() {
			return -1, false
		}
	}
}

// runLen is how many consecutive slots a file takes from the free list at
// a time, for the extents it fills next.
const runLen = 16

// slotRun is a run of consecutive free slots that a file took for its
// next extents: slot base+i is for extent first+i*Stride while bit i of
// left is set. Jobs write and read several files at once, and slots taken
// one at a time from the free list interleave their extents in the slab;
// in runs, the extents of a file that follow each other in the file mostly
// follow each other in the slab too, so that read-ahead and write-back read
// them in large requests. Reserved slots stay free: they are not counted
// as used, and go back to the free list when the file takes more runs or
// when the free list runs out.
type slotRun struct {
	base  int32
	first int64
	left  uint32
}

// takeFromRunLocked takes the slot that a run of f holds for extent idx.
func (e *Engine) takeFromRunLocked(f *file, idx int64) (int32, bool) {
	for i, r := range f.runs {
		if r == nil {
			continue
		}
		d := idx - r.first
		if d < 0 || d%e.cfg.Stride != 0 || d/e.cfg.Stride >= runLen {
			continue
		}
		bit := uint32(1) << (d / e.cfg.Stride)
		if r.left&bit == 0 {
			return 0, false
		}
		if r.left &^= bit; r.left == 0 {
			f.runs[i] = nil
			if f.runs == [2]*slotRun{} {
				delete(e.runs, f)
			}
		}
		return r.base + int32(d/e.cfg.Stride), true
	}
	return 0, false
}

// reserveRunLocked gives f, which just took slot s for extent idx, a run
// of the free slots after s for its next extents, when those are on top of
// the free list and plenty are left for others. A file keeps its last two
// runs, since extents read ahead or written by several threads come a
// little out of order; the one before goes back.
func (e *Engine) reserveRunLocked(f *file, idx int64, s int32) {
	var left uint32
	for i := int32(1); i < runLen; i++ {
		if next, _ := e.free.peek(); e.free.len() < 4*runLen || next != s+i {
			break
		}
		e.free.pop()
		left |= 1 << i
	}
	if left == 0 {
		return
	}
	e.releaseOneRunLocked(f.runs[0])
	f.runs = [2]*slotRun{f.runs[1], {base: s, first: idx, left: left}}
	if e.runs == nil {
		e.runs = map[*file]struct{}{}
	}
	e.runs[f] = struct{}{}
}

// releaseRunLocked puts the slots left in the runs of f back on the free
// list.
func (e *Engine) releaseRunLocked(f *file) {
	for _, r := range f.runs {
		e.releaseOneRunLocked(r)
	}
	f.runs = [2]*slotRun{}
	delete(e.runs, f)
}

// releaseOneRunLocked puts the slots left in r back on the free list.
func (e *Engine) releaseOneRunLocked(r *slotRun) {
	if r == nil {
		return
	}
	for i := int32(0); i < runLen; i++ {
		if r.left&(1<<i) != 0 {
			e.free.push(r.base + i)
		}
	}
	r.left = 0
}

// releaseRunsLocked puts back the slots of every run, and reports whether
// there were any.
func (e *Engine) releaseRunsLocked() bool {
	found := len(e.runs) > 0
	for f := range e.runs {
		e.releaseRunLocked(f)
	}
	return found
}

// releaseSlot returns a slot no index entry names (it was allocated and not
// published) straight to the free list.
func (e *Engine) releaseSlot(s int32) {
	e.mu.Lock()
	e.releaseSlotLocked(s)
	e.mu.Unlock()
}

func (e *Engine) releaseSlotLocked(s int32) {
	e.free.push(s)
	e.used--
	e.cond.Broadcast()
}

// evictToWatermarkLocked evicts clean extents, least recently used first,
// from the eviction high watermark down to the low one. When too few clean
// extents can be evicted, it starts write-back: eviction may trigger it.
func (e *Engine) evictToWatermarkLocked() {
	total := e.slab.Slots()
	if e.used*100 < total*int64(e.tun.EvictHigh) {
		return
	}
	for e.used*100 > total*int64(e.tun.EvictLow) {
		if !e.evictOneLocked() {
			e.kickWriteBackLocked()
			return
		}
	}
}

// evictOneLocked evicts the least recently used clean extent that nobody is
// using, and reports whether it found one.
func (e *Engine) evictOneLocked() bool {
	for x := e.clean.head; x != nil; x = x.next {
		// A pinned slot would not be free before its pin is released, and
		// a leased one is being read.
		if x.wb || e.pins[x.slot] > 0 || !x.mu.TryLock() {
			continue
		}
		e.removeExtentLocked(x)
		x.mu.Unlock()
		e.st.evictions++
		return true
	}
	return false
}

// removeExtentLocked forgets x: the caller holds x.mu exclusively.
func (e *Engine) removeExtentLocked(x *extent) {
	if x.state == dead {
		return
	}
	if x.state == ready {
		e.setCleanLocked(x)
		e.clean.remove(x)
		e.used--
		e.freeSlotLocked(x.slot)
	}
	x.state = dead
	delete(x.f.extents, x.idx)
	if len(x.f.extents) == 0 {
		e.sourceChangedLocked(x.f)
	}
	e.markExtLocked(x)
	e.cond.Broadcast()
}

// setCleanLocked marks x clean and moves it to the clean list.
func (e *Engine) setCleanLocked(x *extent) {
	if x.dirty() {
		e.dirtyBytes -= int64(x.hi - x.lo)
		x.lo, x.hi = 0, 0
		e.dirty.remove(x)
		x.f.dirtyExtents--
	}
	x.recovered = false
	if x.list == nil {
		e.clean.pushBack(x)
	}
}

// setDirtyLocked adds [lo, hi) to the dirty range of x.
func (e *Engine) setDirtyLocked(x *extent, lo, hi int32) {
	now := e.cfg.Clock.Now()
	wasWhole := x.dirty() && e.wholeLocked(x)
	if !x.dirty() {
		e.clean.remove(x)
		x.lo, x.hi, x.dirtySince = lo, hi, now
	} else {
		e.dirtyBytes -= int64(x.hi - x.lo)
		x.lo, x.hi = min(x.lo, lo), max(x.hi, hi)
	}
	e.dirtyBytes += int64(x.hi - x.lo)
	x.recovered = false
	x.gen++
	e.gens.bump(x.slot)
	x.lastWrite = now
	if x.list == &e.dirty {
		e.dirty.moveToBack(x)
	} else {
		e.dirty.pushBack(x)
		x.f.dirtyExtents++
	}
	e.writtenLocked(x.f)
	e.markExtLocked(x)
	// Writers mostly fill extents in order: one dirty from end to end is
	// most likely complete, and writing it to the disk now, while the
	// writer goes on, spares the next commit or fsync (a close) most of
	// the wait. Only the write that completes it does so: an extent
	// rewritten again and again is written ahead once until it is written
	// back, and otherwise waits for the commit, as before. Copy-ups are
	// left to the commit: nobody waits to sync them, and on a disk that
	// serves the backing store too they would compete with the copy-up's
	// own reads.
	if !wasWhole && e.wholeLocked(x) {
		e.slab.WriteBehind(int(x.slot))
	}
}

// wholeLocked reports whether the dirty range of x covers the extent.
func (e *Engine) wholeLocked(x *extent) bool { return x.lo == 0 && int64(x.hi) == e.es }
