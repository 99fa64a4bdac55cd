package engine

import (
	"context"

	"github.com/burstcache/burstcache/cacheserver/seqread"
)

// prefetchWindow is how many extents ahead of a sequential reader are
// copied up in the background.
const prefetchWindow = 2

// missConfirm is how many misses in order make a reader sequential.
const missConfirm = 1

// prefetchAfter copies up the extents after idx of f in the background when
// reads of f look sequential: a miss right after a miss of one of its
// readers on the previous extent this engine holds (Stride before), or a
// hit on an extent that was itself prefetched. Copying up the next extents
// while the reader consumes this one overlaps backing-store latency with
// the reader's work, as kernel read-ahead does. One step in order is
// enough here (missConfirm), unlike for read-ahead of cached extents: a
// miss waits for the backing store, and a prefetch for nothing costs the
// backing store little next to the extent a random reader's miss copies up
// anyway.
func (e *Engine) prefetchAfter(ctx context.Context, f *file, idx, in int64, miss bool) {
	stride := e.cfg.Stride
	e.mu.Lock()
	seq := !miss
	if miss {
		f.misses.Confirm = missConfirm
		seq, _ = f.misses.ReadAt(idx, stride, in == 0, prefetchWindow)
	}
	var todo []int64
	for next := idx + stride; seq && next <= idx+prefetchWindow*stride; next += stride {
		if f.prefetching < prefetchWindow*seqread.MaxStreams && !f.dead && !e.closed && e.hasFreeLocked() &&
			f.extents[next] == nil && next*e.es < max(f.size, f.backingSize) {
			f.prefetching++
			e.active++
			todo = append(todo, next)
		}
	}
	epoch := f.epoch
	e.mu.Unlock()
	for _, next := range todo {
		go e.prefetch(ctx, f, next, epoch)
	}
}

func (e *Engine) prefetch(ctx context.Context, f *file, idx int64, epoch uint64) {
	defer e.leave()
	// The prefetch outlives the call but keeps the caller's identity. A
	// truncate, drop or invalidation since the read voids it (epoch): the
	// extent could hold data of the file as it was.
	// A failed prefetch only costs the reader a miss later.
	_, _ = e.copyUp(context.WithoutCancel(ctx), f, idx, nil, 0, epoch)
	e.mu.Lock()
	f.prefetching--
	e.mu.Unlock()
}

// readAheadWindow is how many extents ahead of a sequential reader of cached
// extents the kernel reads their slots into memory.
const readAheadWindow = 16

// readAheadSlots returns the slots to read into memory after a hit on extent
// idx of f, when the hits of one of its readers go through f in order
// (package seqread). Slots are not contiguous in the slab as extents are in
// a file, so the kernel's own read-ahead, which follows file offsets, does
// not help a reader of cached extents whose pages were dropped; without
// this each extent waits for the disk in turn.
//
// Like the kernel's read-ahead, it works in batches: once the reader has
// consumed half the window, the rest of the window is asked for at once.
// Extents written in order sit in consecutive slots, and readAhead asks for
// those in one range, which reaches the disk as a few large requests
// instead of one per extent. The caller holds e.mu and passes the slots to
// readAhead after releasing it.
func (e *Engine) readAheadSlots(f *file, idx, in int64) (slots [readAheadWindow]int32, n int) {
	_, ahead := f.hits.ReadAt(idx, e.cfg.Stride, in == 0, readAheadWindow)
	return e.readySlotsLocked(f, ahead)
}

// readySlotsLocked returns the slots of the extents of ahead that hold
// data.
func (e *Engine) readySlotsLocked(f *file, ahead seqread.Ahead) (slots [readAheadWindow]int32, n int) {
	for next := ahead.First; next <= ahead.Last && n < len(slots); next += ahead.Stride {
		if x := f.extents[next]; x != nil && x.state == ready {
			slots[n] = x.slot
			n++
		}
	}
	return slots, n
}

// ReadAheadAfter reads into memory the slots of the extents after the one
// at off of path, for a reader whose client saw it go through the file in
// order. A client serves reads from leases without asking the engine, so
// the engine sees only some of the reads of a sequential reader, and
// readAheadSlots alone would not take them for one.
func (e *Engine) ReadAheadAfter(path string, off int64) {
	if off < 0 {
		return
	}
	e.mu.Lock()
	f := e.files[path]
	if f == nil || f.dead {
		e.mu.Unlock()
		return
	}
	slots, n := e.readySlotsLocked(f, f.hits.Sequential(off/e.es, e.cfg.Stride, readAheadWindow))
	e.mu.Unlock()
	e.readAhead(slots[:n])
}

// readAhead starts reading slots into memory, consecutive slots as one
// range. A slot reused meanwhile for another extent only makes the hint
// useless.
func (e *Engine) readAhead(slots []int32) {
	for i := 0; i < len(slots); {
		j := i + 1
		for j < len(slots) && slots[j] == slots[j-1]+1 {
			j++
		}
		e.slab.WillNeed(int(slots[i]), j-i)
		i = j
	}
}
