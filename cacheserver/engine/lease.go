package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// Lease lets a reader on this machine read one cached extent from the slab
// file for as long as it holds the pin that came with it and finds the
// slot's generation and the engine's epoch unchanged in the slot
// generation file (SlotGensFile): then bytes [0, Valid) at Off of the slab
// are the extent's current bytes, and the reader need not ask the engine.
// A write, trim, eviction or drop of the extent moves the generation on
// before the call that made it returns.
type Lease struct {
	Off   int64 // offset of the extent's slot in the slab file
	Valid int   // bytes of the extent the slot holds
	Gen   uint64
	Epoch uint64
}

// SlotGensFile returns the path of the slot generation file, or "" when
// the engine offers no leases.
func (e *Engine) SlotGensFile() string {
	if e.gens == nil {
		return ""
	}
	return filepath.Join(e.cfg.Dir, slotGensName)
}

// maxLeasedShare bounds the slots pinned at once, for reads and leases
// together, to a share of the slab (1/maxLeasedShare): pinned slots are
// neither evicted nor reused, and writers must find space in the rest,
// which write-back and eviction keep making. With a quarter, random 4 KiB
// reads of a file with 256 extents on each server of a 2 GiB cache (1024
// slots each) still asked the server for part of their reads; with half,
// they went from 7.4x to 8.0x the slow backing store of the benchmark.
const maxLeasedShare = 2

// LeaseSpans is ReadSpans for a read inside one extent that also returns a
// lease on the extent, when the engine offers leases and not too many slots
// are pinned already; ok is false otherwise. The pin then stands for the
// lease: the reader releases it when it stops using the lease.
func (e *Engine) LeaseSpans(ctx context.Context, path string, off int64, n int) (spans []Span, pin *Pin, lease Lease, ok bool, err error) {
	if off < 0 || n < 0 || off/e.es != (off+int64(max(n, 1))-1)/e.es {
		return nil, nil, Lease{}, false, fmt.Errorf("lease of %d bytes of %s at %d: %w", n, path, off, ErrInvalid)
	}
	ok = e.leasable()
	var lp *Lease
	if ok {
		lp = &lease
	}
	spans, pin, err = e.readSpans(ctx, path, off, n, lp)
	if pin == nil || len(pin.slots) != 1 {
		ok = false
	}
	return spans, pin, lease, ok, err
}

func (e *Engine) leasable() bool {
	if e.gens == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return int64(len(e.pins))*maxLeasedShare < e.slab.Slots()
}

// CountLeaseReads counts reads that readers served from leases: they are
// hits, and job I/O that background write-back yields to.
func (e *Engine) CountLeaseReads(reads, bytes int64) {
	if reads == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.hits += reads
	e.st.bytesRead += bytes
	e.lastIO = time.Now()
}
