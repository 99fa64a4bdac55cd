package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// slotsOf returns the slots of extents 0, stride, 2*stride... of p.
func (r *rig) slotsOf(p string, n int, stride int64) []int32 {
	r.t.Helper()
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	var out []int32
	for i := range int64(n) {
		x := r.e.files[p].extents[i*stride]
		if x == nil {
			r.t.Fatalf("extent %d of %s is not cached", i*stride, p)
		}
		out = append(out, x.slot)
	}
	return out
}

// breaks counts the places where the next extent is not in the next slot.
func breaks(slots []int32) int {
	n := 0
	for i := 1; i < len(slots); i++ {
		if slots[i] != slots[i-1]+1 {
			n++
		}
	}
	return n
}

// TestFilesFillRunsOfSlots writes two files at once, extent by extent in
// turn, through an engine that holds every second extent (one of two
// striped servers): each file's extents follow each other in the slab,
// but for a break every run.
func TestFilesFillRunsOfSlots(t *testing.T) {
	const es, stride, extents = 4 << 10, 2, 40
	r := newRig(t, es, 256, func(c *Config) { c.Stride = stride })
	data := bytes.Repeat([]byte("s"), es)
	for i := range int64(extents) {
		r.write("a", i*stride*es, data)
		r.write("b", i*stride*es, data)
	}
	for _, p := range []string{"a", "b"} {
		slots := r.slotsOf(p, extents, stride)
		if n := breaks(slots); n > extents/runLen+1 {
			t.Errorf("the extents of %s sit in slots %v: %d breaks, want at most %d", p, slots, n, extents/runLen+1)
		}
	}
}

// TestRunsGiveWayWhenSpaceRunsOut fills the cache to the last slot while
// another file holds a run of free slots it will not use: the writer gets
// those slots, with no write-back or eviction to make room.
func TestRunsGiveWayWhenSpaceRunsOut(t *testing.T) {
	const es, slots = 4 << 10, 128
	r := newRig(t, es, slots, func(c *Config) {
		c.Tunables.DirtyHigh, c.Tunables.DirtyLow = 100, 90
		c.Tunables.EvictHigh, c.Tunables.EvictLow = 100, 90
	})
	data := bytes.Repeat([]byte("f"), es)
	r.write("holder", 0, data)
	r.e.mu.Lock()
	held := r.e.files["holder"].runs != [2]*slotRun{}
	r.e.mu.Unlock()
	if !held {
		t.Fatal("the first file took no run of slots")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range int64(slots - 1) {
		if i == slots-2 {
			// A full cache starts write-back by itself, so what the
			// writes needed shows before the one that fills the last
			// slot; the writes before it took all but one of the free
			// slots of the holder's run already.
			st := r.e.Stats()
			if st.WriteBackBytes != 0 || st.Evictions != 0 {
				t.Fatalf("filling the cache wrote back %d bytes and evicted %d extents, want none", st.WriteBackBytes, st.Evictions)
			}
		}
		if n, err := r.e.WriteAt(ctx, "filler", data, i*es); err != nil || n != es {
			t.Fatalf("write of extent %d of %d: %d, %v", i, slots-1, n, err)
		}
	}
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	if r.e.free.len() != 0 || len(r.e.runs) != 0 {
		t.Fatalf("after filling every slot: %d free, %d runs", r.e.free.len(), len(r.e.runs))
	}
}

// TestFreedSlotsMakeRunsAgain drops a cached file, whose extents go back to
// the free list in no particular order, and then writes two files at once:
// they still get runs of consecutive slots. The slots come back all at
// once, with the commit after the drop, or one at a time: a reader that
// still has the extents pinned, as leases of a mount pin them, releases
// each pin on its own, in no particular order.
func TestFreedSlotsMakeRunsAgain(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		t.Run(fmt.Sprintf("pinned=%v", pinned), func(t *testing.T) {
			const es, extents = 4 << 10, 48
			// No timed commit may take part of the dropped file's slots.
			r := newRig(t, es, 256, func(c *Config) { c.CommitInterval = time.Hour })
			data := bytes.Repeat([]byte("s"), es)
			ctx := context.Background()
			var pins []*Pin
			for i := range int64(extents * 2) {
				r.write("old", i*es, data)
				if pinned {
					_, pin, err := r.e.ReadSpans(ctx, "old", i*es, es)
					if err != nil {
						t.Fatal(err)
					}
					pins = append(pins, pin)
				}
			}
			if err := r.e.Drop(ctx, "old"); err != nil {
				t.Fatal(err)
			}
			if err := r.e.Sync(ctx, ""); err != nil { // the commit makes the slots reusable
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			rng.Shuffle(len(pins), func(i, j int) { pins[i], pins[j] = pins[j], pins[i] })
			for _, pin := range pins {
				pin.Release()
			}
			for i := range int64(extents) {
				r.write("a", i*es, data)
				r.write("b", i*es, data)
			}
			for _, p := range []string{"a", "b"} {
				slots := r.slotsOf(p, extents, 1)
				if n := breaks(slots); n > extents/runLen+2 {
					t.Errorf("the extents of %s sit in slots %v: %d breaks, want at most %d", p, slots, n, extents/runLen+2)
				}
			}
		})
	}
}
