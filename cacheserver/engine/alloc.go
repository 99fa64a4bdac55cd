package engine

import (
	"context"
	"fmt"
)

// allocSlot takes a free slot, evicting clean extents or waiting for
// write-back and index commits when none is free. The caller must hold no
// extent lock: a writer that needs space that is all dirty waits here while
// write-back, which needs extent locks, cleans extents.
func (e *Engine) allocSlot(ctx context.Context) (int32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		if n := len(e.free); n > 0 {
			s := e.free[n-1]
			e.free = e.free[:n-1]
			e.used++
			e.evictToWatermarkLocked()
			return s, nil
		}
		if e.commitErr != nil && len(e.pendingFree) > 0 {
			// Slots wait for a commit that keeps failing: the cache device
			// is broken, and waiting would hang the writer forever.
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

// releaseSlot returns a slot no index entry names (it was allocated and not
// published) straight to the free list.
func (e *Engine) releaseSlot(s int32) {
	e.mu.Lock()
	e.releaseSlotLocked(s)
	e.mu.Unlock()
}

func (e *Engine) releaseSlotLocked(s int32) {
	e.free = append(e.free, s)
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
	e.markExtLocked(x)
	e.cond.Broadcast()
}

// setCleanLocked marks x clean and moves it to the clean list.
func (e *Engine) setCleanLocked(x *extent) {
	if x.dirty() {
		e.dirtyBytes -= int64(x.hi - x.lo)
		x.lo, x.hi = 0, 0
		e.dirty.remove(x)
	}
	if x.list == nil {
		e.clean.pushBack(x)
	}
}

// setDirtyLocked adds [lo, hi) to the dirty range of x.
func (e *Engine) setDirtyLocked(x *extent, lo, hi int32) {
	now := e.cfg.Clock.Now()
	if !x.dirty() {
		e.clean.remove(x)
		x.lo, x.hi, x.dirtySince = lo, hi, now
	} else {
		e.dirtyBytes -= int64(x.hi - x.lo)
		x.lo, x.hi = min(x.lo, lo), max(x.hi, hi)
	}
	e.dirtyBytes += int64(x.hi - x.lo)
	x.gen++
	e.gens.bump(x.slot)
	x.lastWrite = now
	if x.list == &e.dirty {
		e.dirty.moveToBack(x)
	} else {
		e.dirty.pushBack(x)
	}
	e.markExtLocked(x)
}
