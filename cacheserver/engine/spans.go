package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"
)

// ErrNoSpans is returned by ReadSpans for data the slab does not serve: a
// file whose I/O passes through to the backing store, or one dropped while
// it was read. ReadAt reads it.
var ErrNoSpans = errors.New("data is not served from the slab")

// Span is a piece of a read served by ReadSpans: Len bytes at offset Off of
// the slab file, or Len zero bytes when Off is negative.
type Span struct {
	Off int64
	Len int
}

// Pin keeps the slots named by the spans of one ReadSpans call from being
// reused, so that their bytes stay those of the file until the reader has
// read them. A write to the file meanwhile may change them in place, as a
// concurrent write may change what any read returns.
type Pin struct {
	e     *Engine
	slots []int32
	once  sync.Once
}

// Release lets the pinned slots be reused. It may be called more than once
// and on a nil Pin.
func (p *Pin) Release() {
	if p == nil {
		return
	}
	p.once.Do(func() { p.e.unpin(p.slots) })
}

// SlabFile returns the path of the slab file that the offsets of spans
// refer to. A process that opens it reads cached data without copying it
// through the engine; it must only read what ReadSpans hands out, while
// the pin is held.
func (e *Engine) SlabFile() string { return filepath.Join(e.cfg.Dir, "slab") }

// ReadSpans is ReadAt without the copy: it copies up the extents of the n
// bytes of path at off that are missing, pins their slots, and returns
// where in the slab file their bytes are. The spans cover the read up to
// the size the engine knows; a short read ends with io.EOF, as ReadAt's.
// The caller must release the pin, also with io.EOF, once it has read the
// spans, and promptly: a writer that needs space may wait for pinned slots.
func (e *Engine) ReadSpans(ctx context.Context, path string, off int64, n int) ([]Span, *Pin, error) {
	return e.readSpans(ctx, path, off, n, nil)
}

func (e *Engine) readSpans(ctx context.Context, path string, off int64, n int, lease *Lease) ([]Span, *Pin, error) {
	if err := e.enter(); err != nil {
		return nil, nil, err
	}
	defer e.leave()
	if off < 0 || n < 0 {
		return nil, nil, fmt.Errorf("read %s at %d: %w", path, off, ErrInvalid)
	}
	f, err := e.fileForRead(ctx, path)
	if err == nil {
		f, err = e.unlessReplaced(ctx, f)
	}
	if err != nil {
		return nil, nil, err
	}
	size := e.knownSize(f)
	if off >= size {
		return nil, nil, io.EOF
	}
	if e.passThrough(f) {
		return nil, nil, ErrNoSpans
	}
	want := int(min(int64(n), size-off))
	pin := &Pin{e: e}
	var spans []Span
	for done := 0; done < want; {
		pos := off + int64(done)
		idx, in := pos/e.es, pos%e.es
		chunk := int(min(e.es-in, int64(want-done)))
		if spans, err = e.pinExtent(ctx, f, idx, in, chunk, pin, spans, lease); err != nil {
			pin.Release()
			return nil, nil, fmt.Errorf("reading %s at %d: %w", path, pos, err)
		}
		done += chunk
	}
	e.mu.Lock()
	e.st.bytesRead += int64(want)
	e.lastIO = time.Now()
	e.mu.Unlock()
	if want < n {
		return spans, pin, io.EOF
	}
	return spans, pin, nil
}

// pinExtent appends to spans the spans of chunk bytes of extent idx of f
// from offset in, copying the extent up first if it is missing, and pins
// its slot in pin. With lease not nil, it also fills in the lease.
func (e *Engine) pinExtent(ctx context.Context, f *file, idx, in int64, chunk int, pin *Pin, spans []Span, lease *Lease) ([]Span, error) {
	missed := false
	for {
		e.mu.Lock()
		x := f.extents[idx]
		e.mu.Unlock()
		if x == nil {
			e.prefetchAfter(ctx, f, idx, in, true)
			// A non-nil empty p: the copy-up is for this reader, not ahead.
			served, err := e.copyUp(ctx, f, idx, []byte{}, 0)
			if errors.Is(err, errDropped) || errors.Is(err, errNoRoom) {
				return nil, ErrNoSpans
			}
			if err != nil {
				return nil, err
			}
			// Its own copy-up counted a miss; reading what another
			// reader's copy-up brought is a hit, as ReadAt counts it.
			missed = served
			continue
		}
		// Shared, x.mu waits out a copy-up that is filling the slot.
		x.mu.RLock()
		slot, valid, gen, ok, prefetched := e.pinCached(x, in, !missed)
		x.mu.RUnlock()
		if prefetched {
			e.prefetchAfter(ctx, f, idx, in, false)
		}
		if !ok {
			continue
		}
		pin.slots = append(pin.slots, slot)
		base := int64(slot) * e.es
		if lease != nil {
			*lease = Lease{Off: base, Valid: int(valid), Gen: gen, Epoch: e.gens.epoch()}
		}
		data := int(max(min(int64(valid)-in, int64(chunk)), 0))
		spans = appendSpan(spans, Span{Off: base + in, Len: data})
		return appendSpan(spans, Span{Off: -1, Len: chunk - data}), nil
	}
}

// pinCached pins the slot of x, which the caller holds shared, counting a
// hit as readCached does; ok is false when x died meanwhile.
func (e *Engine) pinCached(x *extent, in int64, hit bool) (slot, valid int32, gen uint64, ok, prefetched bool) {
	e.mu.Lock()
	if x.state != ready {
		e.mu.Unlock()
		return 0, 0, 0, false, false
	}
	prefetched, x.prefetched = x.prefetched, false
	if hit {
		e.st.hits++
	}
	if x.list == &e.clean {
		e.clean.moveToBack(x)
	}
	if e.pins == nil {
		e.pins = map[int32]int32{}
	}
	e.pins[x.slot]++
	slot, valid = x.slot, x.valid
	if e.gens != nil {
		gen = e.gens.gen(slot)
	}
	ahead, n := e.readAheadSlots(x.f, x.idx, in)
	e.mu.Unlock()
	e.readAhead(ahead[:n])
	return slot, valid, gen, true, prefetched
}

// appendSpan appends s to spans, merging it with the last span when they
// are contiguous in the slab or both zeros.
func appendSpan(spans []Span, s Span) []Span {
	if s.Len == 0 {
		return spans
	}
	if n := len(spans); n > 0 {
		last := &spans[n-1]
		if (last.Off < 0 && s.Off < 0) || (last.Off >= 0 && last.Off+int64(last.Len) == s.Off) {
			last.Len += s.Len
			return spans
		}
	}
	return append(spans, s)
}

// unpin releases slots pinned by pinCached; a slot freed while pinned
// becomes reusable now.
func (e *Engine) unpin(slots []int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range slots {
		if e.pins[s]--; e.pins[s] > 0 {
			continue
		}
		delete(e.pins, s)
		if _, ok := e.pinnedFree[s]; ok {
			delete(e.pinnedFree, s)
			e.free.push(s)
			e.cond.Broadcast()
		}
	}
}

// reuseLocked makes slots whose retirement is durable reusable, except
// pinned ones, which become reusable when their last pin is released.
func (e *Engine) reuseLocked(slots []int32) {
	for _, s := range slots {
		if e.pins[s] > 0 {
			if e.pinnedFree == nil {
				e.pinnedFree = map[int32]struct{}{}
			}
			e.pinnedFree[s] = struct{}{}
			continue
		}
		e.free.push(s)
	}
}
