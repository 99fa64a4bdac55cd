package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

const (
	backoffMin = 10 * time.Millisecond
	backoffMax = 5 * time.Second
	// flushGiveUp is how many consecutive write-back failures, with no
	// success in between, make a flush give up and report what is left.
	flushGiveUp = 8
)

// kickWriteBackLocked wakes the write-back workers.
func (e *Engine) kickWriteBackLocked() { e.cond.Broadcast() }

// startWorkersLocked starts workers up to the configured thread count;
// workers numbered past it exit by themselves.
func (e *Engine) startWorkersLocked() {
	for e.workers < e.tun.WriteBackThreads {
		e.wg.Add(1)
		go e.worker(e.workers)
		e.workers++
	}
}

// worker writes back dirty extents while write-back is wanted.
func (e *Engine) worker(id int) {
	defer e.wg.Done()
	e.mu.Lock()
	for {
		if e.closed || id >= e.tun.WriteBackThreads {
			e.workers--
			e.mu.Unlock()
			return
		}
		x := e.pickDirtyLocked()
		if x == nil {
			e.cond.Wait()
			continue
		}
		e.mu.Unlock()
		// A failure is counted in Stats and the extent stays dirty, to be
		// retried with backoff.
		start := time.Now()
		_ = e.writeBack(x)
		e.yieldToJobs(time.Since(start))
		e.mu.Lock()
	}
}

// jobIOWindow is how recent a job's read or write must be for background
// write-back to yield to it.
const jobIOWindow = 100 * time.Millisecond

// yieldShare: while jobs read or write, write-back that nothing urgent
// waits for keeps the workers busy, together, about 1/yieldShare of the
// time, as if one worker wrote back a fifth of the time.
const yieldShare = 5

// maxYield bounds one pause of yieldToJobs.
const maxYield = time.Second

// yieldToJobs pauses write-back that nothing urgent waits for, after an
// extent that took spent, while jobs read or write: each worker pauses for
// yieldShare x workers - 1 times what it spent (19 times with four
// workers), so that the jobs keep most of the device and CPU time. A pause
// for each worker alone, as if it were the only one, let four workers on
// each of two servers take as much time as the jobs. Write-back past the
// dirty high watermark, or with writers waiting for space, does not pause:
// the jobs themselves wait for it then. No pause is longer than maxYield:
// an extent that took long waited for a slow backing store more than it
// used the node.
func (e *Engine) yieldToJobs(spent time.Duration) {
	e.mu.Lock()
	pause := !e.wbActive && e.spaceWaiters == 0 && !e.closed && time.Since(e.lastIO) < jobIOWindow
	if pause {
		e.st.yields++
	}
	workers := max(e.tun.WriteBackThreads, 1)
	e.mu.Unlock()
	if !pause {
		return
	}
	select {
	case <-time.After(min(spent*time.Duration(yieldShare*workers-1), maxYield)):
	case <-e.stop:
	}
}

// pickDirtyLocked claims the least recently written dirty extent when
// write-back is wanted: past the dirty high watermark down to the low one,
// during a flush, or when writers wait for space.
func (e *Engine) pickDirtyLocked() *extent {
	dirty, total := int64(e.dirty.n), e.slab.Slots()
	if dirty*100 >= total*int64(e.tun.DirtyHigh) {
		e.wbActive = true
	}
	if dirty*100 <= total*int64(e.tun.DirtyLow) {
		e.wbActive = false
	}
	evictStuck := e.used*100 >= total*int64(e.tun.EvictHigh) && e.clean.n == 0
	if !e.wbActive && e.flushAll == 0 && e.spaceWaiters == 0 && !evictStuck {
		return nil
	}
	now := time.Now()
	for x := e.dirty.head; x != nil; x = x.next {
		if !x.wb && !now.Before(x.retryAt) && x.f.doomed == 0 {
			x.wb = true
			return x
		}
	}
	return nil
}

// errCommitFirst: a write-back that had to wait for a commit (see
// writeBack) failed with it. The error is the cache directory's, not the
// backing store's.
var errCommitFirst = errors.New("committing the index first, which names an older version dirty")

// writeBack writes the dirty range of x, claimed by the caller, to the
// backing file, and hands x to the syncer (syncBacking), which marks it
// clean once the backing file is fsynced, unless it was written meanwhile.
// x stays claimed until then.
//
// It first makes sure that the committed index names no other version of
// x as dirty (durableDirty): one written back before, and rewritten since
// into another slot (copy-on-write), or one of a file dropped since. A
// crash would have the restart write that version back again, over this
// one. Until a commit forgets it, the write-back waits for one, and a
// commit that fails counts as a failed write-back.
func (e *Engine) writeBack(x *extent) error {
	f := x.f
	f.wbmu.RLock()
	defer f.wbmu.RUnlock()
	buf := e.getBuf()
	defer e.putBuf(buf)
	var ok bool
	var slot, lo, hi int32
	var gen uint64
	var cred *ident.Cred
	var recovered bool
	for {
		x.mu.RLock()
		e.mu.Lock()
		// Doom sets doomed holding wbmu: once it returns, no write-back
		// of the file reaches the backing store until the doom ends.
		ok, slot, lo, hi, gen, cred = x.state == ready && x.dirty() && f.doomed == 0, x.slot, x.lo, x.hi, x.gen, f.cred
		recovered = x.recovered
		durable, named := e.durableDirty[x.key()]
		e.mu.Unlock()
		if !ok || !named || durable == slot {
			break
		}
		x.mu.RUnlock()
		if err := e.waitCommit(context.Background()); err != nil {
			e.mu.Lock()
			defer e.mu.Unlock()
			x.wb = false
			e.cond.Broadcast()
			return e.writeBackFailedLocked(x, fmt.Errorf("%w: %w", errCommitFirst, err))
		}
	}
	var err error
	if ok {
		err = e.slab.ReadAt(int(slot), (*buf)[lo:hi], int64(lo))
	}
	x.mu.RUnlock()
	if ok && err == nil {
		err = e.writeBackRange(credContext(cred), f.path, (*buf)[lo:hi], x.idx*e.es+int64(lo), recovered)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if ok && err == nil {
		e.wroteBackLocked(x, gen, lo, hi)
		return nil
	}
	x.wb = false
	e.cond.Broadcast()
	if !ok {
		return nil
	}
	return e.writeBackFailedLocked(x, err)
}

// writeBackRange writes b, the dirty bytes of an extent, at off in the
// backing file p. With recovered, the extent is dirty as the index was
// found after a restart, and the backing file may hold b already: a
// WriteOut wrote it there before the crash, and its fsync never committed
// the extent clean. If it does, b is not written again, since a write
// would move the modification time that the client set on the file
// since (rule 6 of the package doc); the syncer's fsync, which does not
// move it, makes the bytes durable as it would after the write. A read
// that fails or differs, as after a crash of the node that lost the
// backing file system's unsynced pages, leaves the write to be done.
func (e *Engine) writeBackRange(ctx context.Context, p string, b []byte, off int64, recovered bool) error {
	if recovered && e.backingHolds(ctx, p, b, off) {
		return nil
	}
	start := time.Now()
	_, err := e.backing.WriteAt(ctx, p, b, off)
	if err == nil {
		e.writeBackTimes.add(time.Since(start))
	}
	return err
}

// backingHolds reports whether the backing file p holds b at off. A read
// that fails, or stops short at the end of the file, says no.
func (e *Engine) backingHolds(ctx context.Context, p string, b []byte, off int64) bool {
	buf := e.getBuf()
	defer e.putBuf(buf)
	got := (*buf)[:len(b)]
	n, err := e.backing.ReadAt(ctx, p, got, off)
	return n == len(b) && (err == nil || errors.Is(err, io.EOF)) && bytes.Equal(got, b)
}

// credContext returns a context that acts as cred on the backing store, or
// as the process when cred is nil.
func credContext(cred *ident.Cred) context.Context {
	ctx := context.Background()
	if cred != nil {
		ctx = ident.NewContext(ctx, *cred)
	}
	return ctx
}

func (e *Engine) writeBackFailedLocked(x *extent, err error) error {
	err = fmt.Errorf("writing back extent %d of %q: %w", x.idx, x.f.path, err)
	x.failures++
	x.retryAt = time.Now().Add(min(backoffMin<<min(x.failures, 20), backoffMax))
	e.st.wbErrors++
	e.st.lastWBErr = err
	e.failStreak++
	e.log.Warn("Write-back failed, retrying", "path", x.f.path, "extent", x.idx, "failures", x.failures, "err", err)
	return err
}

// wroteBack is an extent whose dirty range [lo, hi) at generation gen was
// written to the backing file, which waits for an fsync.
type wroteBack struct {
	x      *extent
	gen    uint64
	lo, hi int32
}

// wroteBackLocked records that [lo, hi) of x, at generation gen, is in the
// backing file, and queues x for the syncer. The backing file has grown
// now, whatever becomes of the fsync.
func (e *Engine) wroteBackLocked(x *extent, gen uint64, lo, hi int32) {
	f := x.f
	f.backingSize = max(f.backingSize, x.idx*e.es+int64(hi))
	f.exists = true
	f.sizeGen++
	x.out, x.outGen = true, gen
	e.unsynced[f] = append(e.unsynced[f], wroteBack{x: x, gen: gen, lo: lo, hi: hi})
	e.kickSyncerLocked()
}

func (e *Engine) kickSyncerLocked() {
	select {
	case e.syncKick <- struct{}{}:
	default:
	}
}

// syncer fsyncs the backing files that write-back wrote to, and only then
// lets their extents count as clean: an extent whose clean state reached
// the index while its bytes were still only in the backing file system's
// page cache (or a parallel file system client's) would be lost to a crash
// of the node, since the cache would never write it back again, and
// eviction could drop the only durable copy before that. Write-back of
// many extents of a file costs one fsync per round: the extents written
// while one round syncs wait for the next. A round fsyncs as many files at
// a time as there are write-back workers, since a job's many small files
// each need their own.
func (e *Engine) syncer() {
	defer e.wg.Done()
	var spent time.Duration
	for {
		select {
		case <-e.stop:
			// Extents still waiting stay dirty in the index, and are
			// written back again after the next Open.
			return
		case <-e.syncKick:
		}
		e.syncerYield(spent)
		e.mu.Lock()
		batch := e.unsynced
		e.unsynced = map[*file][]wroteBack{}
		par := make(chan struct{}, max(e.tun.WriteBackThreads, 1))
		e.mu.Unlock()
		start := time.Now()
		dirs := newDirSyncs(e.backing)
		var wg sync.WaitGroup
		for f, ws := range batch {
			par <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.syncBacking(f, ws, dirs)
				<-par
			}()
		}
		wg.Wait()
		spent = time.Since(start)
	}
}

// beginUrgentLocked counts a flush that a job's call waits for, and ends a
// pause of the syncer (syncerYield).
func (e *Engine) beginUrgentLocked() {
	e.urgent++
	select {
	case e.urgentKick <- struct{}{}:
	default:
	}
}

// syncerYield pauses the syncer before a round, when the last one took
// spent, as yieldToJobs pauses the workers, so that its fsyncs leave jobs
// most of the device: during a flush hint, two readers of 4 KiB blocks
// kept 0.75x of their rate without write-back on the development VM, and
// 0.85-0.90x with the pauses (0.88x before write-back fsynced). It does not
// pause while a job's call waits for a flush of its own (urgent), and a
// pause ends when one begins.
func (e *Engine) syncerYield(spent time.Duration) {
	// A token left by an urgent flush that has begun is seen under the
	// lock, as urgent; one sent after it ends the pause.
	select {
	case <-e.urgentKick:
	default:
	}
	e.mu.Lock()
	pause := e.urgent == 0 && !e.wbActive && e.spaceWaiters == 0 && !e.closed && time.Since(e.lastIO) < jobIOWindow && spent > 0
	if pause {
		e.st.syncYields++
	}
	e.mu.Unlock()
	if !pause {
		return
	}
	t := time.NewTimer(min(spent*(yieldShare-1), maxYield))
	defer t.Stop()
	select {
	case <-t.C:
	case <-e.urgentKick:
		e.mu.Lock()
		e.st.syncYieldsCut++
		e.mu.Unlock()
	case <-e.stop:
	}
}

// syncBacking fsyncs the backing file of f, and the directories above it
// the first time (syncNameOf, with the other files of the round through
// dirs), then marks the extents ws, written back to it, clean, or failed.
func (e *Engine) syncBacking(f *file, ws []wroteBack, dirs *dirSyncs) {
	// Holding wbmu keeps truncate, drop and doom from running during the
	// fsync, as during write-back itself.
	f.wbmu.RLock()
	e.mu.Lock()
	skip, cred := f.doomed > 0 || f.dead, f.cred
	e.mu.Unlock()
	var err error
	if !skip {
		// Durable step: the fsync of the backing file. A crash before it
		// leaves the extents dirty in the index, to be written back again.
		err = e.backing.Sync(credContext(cred), f.path)
		if err == nil {
			err = e.syncNameOf(credContext(cred), f, dirs)
		}
	}
	f.wbmu.RUnlock()
	for _, w := range ws {
		x := w.x
		x.mu.RLock()
		e.mu.Lock()
		x.wb, x.out = false, false
		switch {
		case skip || x.state != ready:
			// A doomed file's extents wait for its doom to end; a dead
			// extent is gone.
		case err != nil:
			// Counted in Stats; the extent is retried with backoff.
			_ = e.writeBackFailedLocked(x, fmt.Errorf("fsync: %w", err))
		default:
			e.syncedLocked(x, w.gen, w.lo, w.hi)
		}
		e.mu.Unlock()
		x.mu.RUnlock()
	}
	e.mu.Lock()
	e.cond.Broadcast()
	e.mu.Unlock()
}

// syncedLocked records that [lo, hi) of x at generation gen is durable in
// the backing file. The clean state is committed with the next batch: a
// crash before that only writes the extent back again.
func (e *Engine) syncedLocked(x *extent, gen uint64, lo, hi int32) {
	x.failures, x.retryAt = 0, time.Time{}
	e.failStreak = 0
	e.st.writeBack += int64(hi - lo)
	if x.gen == gen {
		e.setCleanLocked(x)
		e.markExtLocked(x)
	}
}

// Flush writes back every dirty extent, with all workers, and blocks until
// no dirty byte is left and the index says so durably, and the names and
// attributes that calls through the cache changed on the backing store are
// durable there too (NamesChanged, AttrsChanged). It returns an error wrapping ErrDirtyLeft, saying
// what is left, when ctx ends or write-back keeps failing.
func (e *Engine) Flush(ctx context.Context) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if err := e.flushData(ctx); err != nil {
		return err
	}
	return e.syncChanged()
}

// flushData is Flush but for the names.
func (e *Engine) flushData(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushAll++
	defer func() { e.flushAll-- }()
	e.cond.Broadcast()
	errs := e.st.wbErrors
	for e.dirty.n > 0 {
		if e.st.wbErrors-errs >= flushGiveUp && e.failStreak >= flushGiveUp {
			return e.dirtyLeftLocked(e.st.lastWBErr)
		}
		if err := e.waitCtxLocked(ctx); err != nil {
			return e.dirtyLeftLocked(err)
		}
	}
	// Durable step: the index calling the extents clean (rule 6).
	return flushedCommit(e.waitCommitLocked(ctx))
}

func (e *Engine) dirtyLeftLocked(cause error) error {
	return fmt.Errorf("%w: %d bytes in %d extents: %w", ErrDirtyLeft, e.dirtyBytes, e.dirty.n, cause)
}
