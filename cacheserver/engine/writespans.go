package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// txKind is how a WriteTx changes its extent.
type txKind uint8

const (
	// txInPlace writes into a dirty extent's own slot.
	txInPlace txKind = iota
	// txFresh fills a new extent that the backing file has no data of.
	txFresh
	// txCopyOnWrite replaces a clean extent wholly, in a new slot.
	txCopyOnWrite
)

// WriteTx is a write that BeginWrite prepared: its caller writes the Len
// bytes into the slab file at Off, then calls Commit. Until then the
// extent is locked: readers, write-back, eviction and other writers of it
// wait, so the caller must commit promptly.
type WriteTx struct {
	// Off is where in the slab file the bytes go; Len how many there are.
	Off int64
	Len int

	e      *Engine
	f      *file
	x      *extent
	kind   txKind
	slot   int32
	in     int32
	fileAt int64
	done   bool
}

// BeginWrite is WriteAt without the copy, for a writer on this machine: it
// checks the limits, prepares the slot that n bytes of path at off go to,
// and returns where to write them. The write must lie in one extent, and
// be one the slab takes without reading anything first: into an extent
// that is dirty already, over a whole extent, or into an extent that the
// backing file has no data of. Other writes fail with ErrNoSpans; WriteAt
// takes them.
func (e *Engine) BeginWrite(ctx context.Context, path string, off int64, n int) (*WriteTx, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	tx, err := e.beginWrite(ctx, path, off, n)
	if err != nil {
		e.leave()
		return nil, err
	}
	return tx, nil
}

func (e *Engine) beginWrite(ctx context.Context, path string, off int64, n int) (*WriteTx, error) {
	idx, in := off/e.es, off%e.es
	if n <= 0 || in+int64(n) > e.es {
		return nil, ErrNoSpans
	}
	f, err := e.fileForWrite(ctx, path, off, int64(n))
	if errors.Is(err, errPassThrough) {
		return nil, ErrNoSpans
	}
	if err != nil {
		return nil, err
	}
	tx := &WriteTx{e: e, f: f, in: int32(in), fileAt: off, Len: n}
	for {
		done, err := e.prepareTx(ctx, tx, idx)
		if err != nil {
			return nil, err
		}
		if done {
			tx.Off = int64(tx.slot)*e.es + in
			return tx, nil
		}
	}
}

// prepareTx locks extent idx of tx's file and gives tx its slot; done is
// false when the extent changed meanwhile and the caller must look again.
func (e *Engine) prepareTx(ctx context.Context, tx *WriteTx, idx int64) (done bool, err error) {
	f, end := tx.f, tx.in+int32(tx.Len)
	e.mu.Lock()
	x, dead := f.extents[idx], f.dead
	inPlace := x != nil && x.state == ready && x.dirty()
	// A missing extent that the backing file has no data of needs no read.
	fresh := x == nil && f.statted && f.backingSize <= idx*e.es
	e.mu.Unlock()
	whole := tx.in == 0 && int64(end) == e.es
	switch {
	case dead || (!inPlace && !fresh && !whole):
		return false, ErrNoSpans
	case inPlace:
		return e.prepareInPlace(tx, x)
	}
	// Slots are taken before any extent lock: a writer waiting for space
	// must not hold what write-back needs.
	slot, err := e.allocSlot(ctx, f, idx, true)
	if err != nil {
		return false, err
	}
	if x == nil {
		return e.prepareFresh(tx, idx, slot, whole)
	}
	x.mu.Lock()
	e.mu.Lock()
	clean := x.state == ready && !x.dirty()
	e.mu.Unlock()
	if !clean {
		x.mu.Unlock()
		e.releaseSlot(slot)
		return false, nil
	}
	tx.x, tx.kind, tx.slot = x, txCopyOnWrite, slot
	return true, nil
}

// prepareInPlace locks the dirty extent x for a write into its own slot.
// Bytes between the end of its data and the write must read as zeros.
func (e *Engine) prepareInPlace(tx *WriteTx, x *extent) (bool, error) {
	x.mu.Lock()
	e.mu.Lock()
	ok, valid := x.state == ready && x.dirty(), x.valid
	e.mu.Unlock()
	if !ok {
		x.mu.Unlock()
		return false, nil
	}
	if tx.in > valid {
		if err := e.writeZeros(x.slot, valid, tx.in); err != nil {
			x.mu.Unlock()
			return false, err
		}
	}
	tx.x, tx.kind, tx.slot = x, txInPlace, x.slot
	return true, nil
}

// prepareFresh makes a placeholder of extent idx holding slot. Its bytes
// before the write read as zeros: the backing file has none there, or the
// write covers the whole extent.
func (e *Engine) prepareFresh(tx *WriteTx, idx int64, slot int32, whole bool) (bool, error) {
	x, err := e.placeholder(tx.f, idx, slot)
	if errors.Is(err, errDropped) {
		return false, ErrNoSpans
	}
	if x == nil || err != nil {
		return false, err
	}
	if !whole {
		if err := e.writeZeros(slot, 0, tx.in); err != nil {
			e.mu.Lock()
			e.abandonLocked(x, slot)
			e.mu.Unlock()
			x.mu.Unlock()
			return false, err
		}
	}
	tx.x, tx.kind, tx.slot = x, txFresh, slot
	return true, nil
}

// Commit ends the write. With wrote set, the caller wrote all Len bytes at
// Off and the write takes effect as a WriteAt would: the index entry that
// names the slot is queued only now, after the data is in the slab (crash
// safety rule 1). Without it the write did not happen, though the caller
// may have written some of the bytes: a new slot is given up, and in a
// dirty extent, which the caller may have changed in place, the range
// that held data is marked dirty again, so that whatever is there now
// reaches the backing store, as recovery does after a crash.
func (tx *WriteTx) Commit(wrote bool) {
	if tx.done {
		return
	}
	tx.done = true
	e, x := tx.e, tx.x
	e.mu.Lock()
	if wrote {
		e.commitTxLocked(tx)
	} else {
		e.abortTxLocked(tx)
	}
	e.mu.Unlock()
	x.mu.Unlock()
	if wrote {
		e.grow(tx.f, tx.fileAt+int64(tx.Len))
	}
	e.leave()
}

func (e *Engine) commitTxLocked(tx *WriteTx) {
	x, in, end := tx.x, tx.in, tx.in+int32(tx.Len)
	switch tx.kind {
	case txInPlace:
		e.countDeviceWriteLocked(int64(end - min(in, x.valid)))
		x.valid = max(x.valid, end)
	case txFresh:
		e.countDeviceWriteLocked(int64(end))
		e.publishLocked(x, tx.slot, end)
	case txCopyOnWrite:
		e.countDeviceWriteLocked(e.es)
		e.freeSlotLocked(x.slot)
		e.used--
		x.slot, x.valid = tx.slot, int32(e.es)
	}
	e.setDirtyLocked(x, in, end)
	e.st.bytesWritten += int64(tx.Len)
	e.lastIO = time.Now()
}

func (e *Engine) abortTxLocked(tx *WriteTx) {
	x := tx.x
	switch tx.kind {
	case txInPlace:
		if hi := min(tx.in+int32(tx.Len), x.valid); tx.in < hi {
			e.setDirtyLocked(x, tx.in, hi)
		}
	case txFresh:
		e.abandonLocked(x, tx.slot)
	case txCopyOnWrite:
		e.releaseSlotLocked(tx.slot)
	}
}

// String describes tx for logs.
func (tx *WriteTx) String() string {
	return fmt.Sprintf("write of %d bytes of %s at %d", tx.Len, tx.f.path, tx.fileAt)
}
