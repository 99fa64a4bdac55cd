package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/seqread"
)

// prefetchWindow is how many extents ahead of a sequential reader are
// copied up in the background, for a file that the kernel reads ahead of
// copies (backing.RangeCopier). For one it does not, the window is twice
// as wide and its copies go in copyStreams streams at once.
const prefetchWindow = 8

// copyStreams is how many copies of one prefetch run go at once for a
// backing file that the kernel does not read ahead, as a FUSE file system
// in front of remote storage opens its files: each copy waits for the
// store's latency, and a reader faster than one copy at a time would wait
// for every extent. For a file that the kernel reads ahead, one stream
// through one open file lets the read-ahead follow it; several would read
// it in scattered requests, and its read-ahead already keeps requests in
// flight.
const copyStreams = 4

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
//
// Like the kernel's read-ahead it works in batches: once fewer than half
// the window's extents ahead of the reader are cached or on their way, it
// claims the rest of the window at once, and prefetchRun copies them up
// through one open of the backing file. The extents are claimed here,
// before the call returns: a reader that comes to one of them waits for
// its copy-up rather than starting its own, and a truncate or drop that
// comes later finds the claims and waits for them.
func (e *Engine) prefetchAfter(ctx context.Context, f *file, idx, in int64, miss bool) {
	stride := e.cfg.Stride
	e.mu.Lock()
	window := int64(prefetchWindow)
	if f.notReadAhead {
		window *= 2
	}
	seq := !miss
	if miss {
		f.misses.Confirm = missConfirm
		seq, _ = f.misses.ReadAt(idx, stride, in == 0, int(window))
	}
	end := idx + window*stride
	first := idx + stride
	for first <= end && f.extents[first] != nil {
		first += stride
	}
	var run []claim
	for next := first; seq && first <= idx+window/2*stride && next <= end; next += stride {
		if f.prefetching >= 2*prefetchWindow*seqread.MaxStreams || f.dead || e.closed ||
			next*e.es >= max(f.size, f.backingSize) {
			break
		}
		if f.extents[next] != nil {
			continue
		}
		slot, ok := e.takeSlotLocked(f, next)
		if !ok {
			break
		}
		f.copyingLocked()
		x, _ := e.placeholderLocked(f, next, slot)
		if x == nil {
			// Taking the slot evicted the last extent of f, which
			// dropped it.
			break
		}
		f.prefetching++
		run = append(run, claim{x, slot})
	}
	if len(run) == 0 {
		e.mu.Unlock()
		return
	}
	e.active++
	switch {
	case f.copier && !f.copierStale && !f.notReadAhead && sameIdentity(ctx, f.copierCtx):
		f.queued = append(f.queued, run)
		e.mu.Unlock()
	case !f.copier && !f.notReadAhead:
		f.copier, f.copierStale, f.copierCtx = true, false, ctx
		e.mu.Unlock()
		go e.copierRun(ctx, f, run)
	default:
		e.mu.Unlock()
		go e.prefetchRun(ctx, f, run)
	}
}

// sameIdentity reports whether a and b carry the same identity, so that
// a backing file one of them opened may serve the other.
func sameIdentity(a, b context.Context) bool {
	ca, oka := ident.FromContext(a)
	cb, okb := ident.FromContext(b)
	if !oka || !okb {
		return oka == okb
	}
	return ca.UID == cb.UID && ca.GID == cb.GID && slices.Equal(ca.Groups, cb.Groups) &&
		ca.HasCaps == cb.HasCaps && ca.Caps == cb.Caps
}

// claim is a placeholder, held exclusively, and the slot it fills.
type claim struct {
	x    *extent
	slot int32
}

// prefetchRun fills the claims of f that prefetchAfter made, through one
// open backing file when the kernel copies, or else each on its own. One
// open per run instead of one per extent spares the backing store's
// metadata service. A file that the kernel reads ahead is copied in file
// order, so that its read-ahead follows the run as it would one reader of
// the file (see the package doc); any other in copyStreams streams that
// take the claims in turn, so that the extents come in about the order a
// reader wants them. It outlives the read that started it but keeps the
// caller's identity. A failed prefetch only costs the reader a miss later.
func (e *Engine) prefetchRun(ctx context.Context, f *file, run []claim) {
	defer e.leave()
	ctx = context.WithoutCancel(ctx)
	e.throughOneOpen(ctx, f, func(cp backing.CopyFunc, readsAhead bool) {
		e.fillRun(ctx, run, cp, readsAhead)
	})
	e.mu.Lock()
	f.prefetching -= len(run)
	e.mu.Unlock()
}

// copierRun fills run, and then the runs that prefetchAfter queues for f
// while it works, through one open of the backing file: for a reader that
// waits for the copies, that is one open for the whole file. A run through
// an open of its own would start the kernel's read-ahead of the backing
// file anew, with small requests that grow only as the run goes on (the
// disk then saw requests of 2.0-2.5 MiB on average where one reader of the
// file makes 3.8-4.0 MiB ones), and costs a parallel file system's
// metadata service an open per run. It ends when no run waits, and is then
// started anew by the next one.
func (e *Engine) copierRun(ctx context.Context, f *file, run []claim) {
	ctx = context.WithoutCancel(ctx)
	e.throughOneOpen(ctx, f, func(cp backing.CopyFunc, readsAhead bool) {
		for ; run != nil; run = e.nextQueued(f, len(run)) {
			e.fillRun(ctx, run, cp, readsAhead)
		}
	})
}

// throughOneOpen calls fill with a CopyFunc of one open of f's backing
// file, when the kernel copies (backing.RangeCopier), and whether the
// kernel reads that file ahead, which it records in f; or else with none,
// for copies through memory, each on its own.
func (e *Engine) throughOneOpen(ctx context.Context, f *file, fill func(cp backing.CopyFunc, readsAhead bool)) {
	done := false
	if rc, ok := e.backing.(backing.RangeCopier); ok && !e.noKernelCopy.Load() {
		_ = rc.CopyRanges(ctx, f.path, func(cp backing.CopyFunc, readsAhead bool) error {
			done = true
			e.mu.Lock()
			f.notReadAhead = !readsAhead
			e.mu.Unlock()
			fill(cp, readsAhead)
			return nil
		})
	}
	if !done {
		fill(nil, true)
	}
}

// fillRun copies up run through cp: in file order for a file that the
// kernel reads ahead, or with no cp, and else in copyStreams streams.
func (e *Engine) fillRun(ctx context.Context, run []claim, cp backing.CopyFunc, readsAhead bool) {
	if readsAhead || cp == nil {
		e.fillClaims(ctx, run, cp)
		return
	}
	e.fillStreams(ctx, run, cp)
}

// nextQueued ends the copier's run of filled claims and returns the next
// run queued for it, or nil when none waits, and the copier of f ends.
func (e *Engine) nextQueued(f *file, filled int) []claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	f.prefetching -= filled
	e.active--
	if e.active == 0 && e.closed {
		e.cond.Broadcast()
	}
	if len(f.queued) == 0 {
		f.copier, f.copierCtx = false, nil
		return nil
	}
	run := f.queued[0]
	f.queued[0] = nil
	f.queued = f.queued[1:]
	return run
}

// fillStreams copies up run through cp in copyStreams streams at once,
// stream i taking claims i, i+copyStreams, and so on.
func (e *Engine) fillStreams(ctx context.Context, run []claim, cp backing.CopyFunc) {
	var wg sync.WaitGroup
	for i := range min(copyStreams, len(run)) {
		var stream []claim
		for j := i; j < len(run); j += copyStreams {
			stream = append(stream, run[j])
		}
		// Only the thread that runs it carries the caller's identity, for
		// a store that checks it on every read.
		wg.Go(func() {
			_ = ident.DoContext(ctx, func() error {
				e.fillClaims(ctx, stream, cp)
				return nil
			})
		})
	}
	wg.Wait()
}

// fillClaims copies up claims in order, through cp if it is not nil.
func (e *Engine) fillClaims(ctx context.Context, claims []claim, cp backing.CopyFunc) {
	for _, c := range claims {
		_ = e.fillCopy(ctx, c.x, c.slot, cp, nil, 0)
	}
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
