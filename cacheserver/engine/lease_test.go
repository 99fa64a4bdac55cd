package engine

import (
	"context"
	"testing"
)

// TestLeasesStopAtTheirShareOfTheSlots leases extents one after another
// and checks that the engine lends leases on 1/maxLeasedShare of its slots
// and no more, still serving the reads it refuses a lease for, and lends
// again once a lease is given back: pinned slots can be neither evicted
// nor reused, and writers must find space in the rest.
func TestLeasesStopAtTheirShareOfTheSlots(t *testing.T) {
	const es, slots = 64 << 10, 16
	r := newRig(t, es, slots, nil)
	r.write("f", 0, make([]byte, slots*es))
	ctx := context.Background()
	var held []*Pin
	lent := 0
	for idx := range int64(slots) {
		spans, pin, _, ok, err := r.e.LeaseSpans(ctx, "f", idx*es, es)
		if err != nil || len(spans) == 0 {
			t.Fatalf("lease of extent %d: %v, %d spans", idx, err, len(spans))
		}
		if ok {
			lent++
			held = append(held, pin)
		} else {
			pin.Release()
		}
	}
	if want := slots / maxLeasedShare; lent != want {
		t.Fatalf("lent %d leases on a %d-slot cache, want %d", lent, slots, want)
	}
	held[0].Release()
	if _, pin, _, ok, err := r.e.LeaseSpans(ctx, "f", (slots-1)*es, es); err != nil || !ok {
		t.Fatalf("no lease after one was given back: %v", err)
	} else {
		pin.Release()
	}
	for _, p := range held[1:] {
		p.Release()
	}
}
