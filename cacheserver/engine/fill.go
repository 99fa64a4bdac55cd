package engine

import (
	"context"
)

var zeros = make([]byte, 1<<16)

// writeZeros zeroes [from, to) of slot.
func (e *Engine) writeZeros(slot, from, to int32) error {
	for from < to {
		n := min(to-from, int32(len(zeros)))
		if err := e.slab.WriteAt(int(slot), zeros[:n], int64(from)); err != nil {
			return err
		}
		from += n
	}
	return nil
}

// fillNew fills the placeholder x, held exclusively, with a write at in.
// A write that covers the whole extent needs no read; otherwise the extent
// is copied up first when the backing file may hold data there.
func (e *Engine) fillNew(ctx context.Context, x *extent, slot, in int32, data []byte) error {
	end := in + int32(len(data))
	if in == 0 && int64(end) == e.es {
		return e.finishFill(x, slot, data, 0, in, end)
	}
	buf := e.getBuf()
	defer e.putBuf(buf)
	b := *buf
	n := 0
	if e.mayHaveBacking(x) {
		var inBuf bool
		var err error
		if n, inBuf, err = e.copyToSlot(ctx, x.f, x.idx, slot, nil, b); err != nil {
			return e.publishFill(x, slot, 0, 0, in, end, err)
		}
		if !inBuf {
			err := e.writeOverCopy(slot, int32(n), in, data)
			return e.publishFill(x, slot, max(int32(n), end), int64(n), in, end, err)
		}
	}
	if int(in) > n {
		clear(b[n:in])
	}
	copy(b[in:], data)
	return e.finishFill(x, slot, b[:max(int32(n), end)], int64(n), in, end)
}

// writeOverCopy writes data at in into slot, whose first n bytes were just
// copied up, zeroing the gap between the copy and the data.
func (e *Engine) writeOverCopy(slot, n, in int32, data []byte) error {
	if in > n {
		if err := e.writeZeros(slot, n, in); err != nil {
			return err
		}
	}
	return e.slab.WriteAt(int(slot), data, int64(in))
}

// mayHaveBacking reports whether the backing file, as last seen, has data
// in extent x.
func (e *Engine) mayHaveBacking(x *extent) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !x.f.statted || x.f.backingSize > x.idx*e.es
}

// finishFill writes the new content of a placeholder into its slot and
// publishes it dirty over [lo, hi). copied bytes came from the backing store.
func (e *Engine) finishFill(x *extent, slot int32, content []byte, copied int64, lo, hi int32) error {
	err := e.slab.WriteAt(int(slot), content, 0)
	return e.publishFill(x, slot, int32(len(content)), copied, lo, hi, err)
}

// publishFill publishes a placeholder whose slot holds valid bytes of
// content, dirty over [lo, hi), or abandons it when filling the slot failed
// with err. copied bytes came from the backing store.
func (e *Engine) publishFill(x *extent, slot, valid int32, copied int64, lo, hi int32, err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.abandonLocked(x, slot)
		return err
	}
	if copied > 0 {
		e.st.misses++
		e.st.copyUp += copied
	}
	e.countDeviceWriteLocked(int64(valid))
	e.publishLocked(x, slot, valid)
	e.setDirtyLocked(x, lo, hi)
	return nil
}

// copyOnWrite writes into a new slot the content of the clean extent x,
// held exclusively, with data applied at in, then retires the old slot.
func (e *Engine) copyOnWrite(x *extent, slot, in int32, data []byte) error {
	end := in + int32(len(data))
	var content []byte
	if in == 0 && int64(end) == e.es {
		content = data
	} else {
		buf := e.getBuf()
		defer e.putBuf(buf)
		b := *buf
		if err := e.slab.ReadAt(int(x.slot), b[:x.valid], 0); err != nil {
			e.releaseSlot(slot)
			return err
		}
		if in > x.valid {
			clear(b[x.valid:in])
		}
		copy(b[in:], data)
		content = b[:max(x.valid, end)]
	}
	if err := e.slab.WriteAt(int(slot), content, 0); err != nil {
		e.releaseSlot(slot)
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.countDeviceWriteLocked(int64(len(content)))
	e.freeSlotLocked(x.slot)
	e.used--
	x.slot, x.valid = slot, int32(len(content))
	e.setDirtyLocked(x, in, end)
	return nil
}
