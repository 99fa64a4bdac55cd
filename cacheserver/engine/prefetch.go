package engine

import "context"

// prefetchWindow is how many extents ahead of a sequential reader are
// copied up in the background.
const prefetchWindow = 2

// prefetchAfter copies up the extents after idx of f in the background when
// reads of f look sequential: a miss right after a miss of the previous
// extent this engine holds (Stride before), or a hit on an extent that was
// itself prefetched. Copying up the
// next extents while the reader consumes this one overlaps backing-store
// latency with the reader's work, as kernel read-ahead does.
func (e *Engine) prefetchAfter(ctx context.Context, f *file, idx int64, miss bool) {
	stride := e.cfg.Stride
	e.mu.Lock()
	seq := !miss || f.lastMiss == idx-stride
	if miss {
		f.lastMiss = idx
	}
	var todo []int64
	for next := idx + stride; seq && next <= idx+prefetchWindow*stride; next += stride {
		if f.prefetching < prefetchWindow && !f.dead && !e.closed && len(e.free) > 0 &&
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
