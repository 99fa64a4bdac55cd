package engine

import "context"

// prefetchAfter copies up extent idx+1 of f in the background when reads of
// f look sequential: a miss right after a miss of the previous extent, or a
// hit on an extent that was itself prefetched. Copying up the next extent
// while the reader consumes this one overlaps backing-store latency with
// the reader's work, as kernel read-ahead does.
func (e *Engine) prefetchAfter(ctx context.Context, f *file, idx int64, miss bool) {
	next := idx + 1
	e.mu.Lock()
	seq := !miss || f.lastMiss == idx-1
	if miss {
		f.lastMiss = idx
	}
	ok := seq && !f.prefetching && !f.dead && !e.closed && len(e.free) > 0 &&
		f.extents[next] == nil && next*e.es < max(f.size, f.backingSize)
	epoch := f.epoch
	if ok {
		f.prefetching = true
		e.active++
	}
	e.mu.Unlock()
	if !ok {
		return
	}
	go func() {
		defer e.leave()
		// The prefetch outlives the call but keeps the caller's identity.
		// A truncate, drop or invalidation since the read voids it: the
		// extent could hold data of the file as it was.
		e.copyUp(context.WithoutCancel(ctx), f, next, nil, 0, epoch)
		e.mu.Lock()
		f.prefetching = false
		e.mu.Unlock()
	}()
}
