package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// spanBytes reads the bytes spans name from the slab file.
func spanBytes(t *testing.T, e *Engine, spans []Span) []byte {
	t.Helper()
	f, err := os.Open(e.SlabFile())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []byte
	for _, s := range spans {
		b := make([]byte, s.Len)
		if s.Off >= 0 {
			if _, err := f.ReadAt(b, s.Off); err != nil {
				t.Fatalf("reading span %+v: %v", s, err)
			}
		}
		out = append(out, b...)
	}
	return out
}

func TestReadSpansServeWhatReadAtReads(t *testing.T) {
	const es = 64 << 10
	r := newRig(t, es, 16, nil)
	ctx := context.Background()
	data := make([]byte, 3*es+1234)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	r.writeBacking("a", data)
	// b has a hole: data at its start and far past it, none between.
	r.write("b", 0, []byte("head"))
	r.write("b", 2*es+100, []byte("tail"))
	for _, p := range []string{"a", "b"} {
		size, err := r.e.Size(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			off := rng.Int64N(size + 10)
			n := rng.IntN(2*es) + 1
			want := make([]byte, n)
			got, rerr := r.e.ReadAt(ctx, p, want, off)
			want = want[:got]
			spans, pin, err := r.e.ReadSpans(ctx, p, off, n)
			if !errors.Is(err, rerr) && (err != nil || rerr != nil) {
				t.Fatalf("ReadSpans(%s, %d, %d) error %v, ReadAt error %v", p, off, n, err, rerr)
			}
			if b := spanBytes(t, r.e, spans); !bytes.Equal(b, want) {
				t.Fatalf("ReadSpans(%s, %d, %d): %d bytes differ from ReadAt's %d", p, off, n, len(b), len(want))
			}
			pin.Release()
		}
	}
}

func TestReadSpansPinSlotsUntilReleased(t *testing.T) {
	const es, slots = 64 << 10, 4
	r := newRig(t, es, slots, nil)
	ctx := context.Background()
	data := bytes.Repeat([]byte("pinned!"), es/7+1)[:es]
	r.writeBacking("a", data)
	spans, pin, err := r.e.ReadSpans(ctx, "a", 0, es)
	if err != nil || len(spans) != 1 {
		t.Fatalf("ReadSpans = %+v, %v; want one span", spans, err)
	}
	if err := r.e.EvictPath(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// Without the pin, these writes would reuse the evicted slot.
	for i := range int64(slots) {
		r.write("b", i*es, bytes.Repeat([]byte{byte('0' + i)}, es))
	}
	if got := spanBytes(t, r.e, spans); !bytes.Equal(got, data) {
		t.Fatal("a pinned slot was reused")
	}
	slot := int32(spans[0].Off / es)
	waitFor(t, func() bool {
		r.e.mu.Lock()
		defer r.e.mu.Unlock()
		_, ok := r.e.pinnedFree[slot]
		return ok
	})
	pin.Release()
	r.e.mu.Lock()
	_, held := r.e.pinnedFree[slot]
	pins := len(r.e.pins)
	r.e.mu.Unlock()
	if held || pins != 0 {
		t.Fatalf("after Release: slot still held %v, %d slots pinned", held, pins)
	}
	for i := range int64(slots) {
		r.write("c", i*es, []byte("x"))
	}
	if got := r.readAll("b"); !bytes.Equal(got[3*es:], bytes.Repeat([]byte{'3'}, es)) {
		t.Fatal("b lost data")
	}
}

func TestReadSpansAtEndOfFile(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	r.writeBacking("a", []byte("12345"))
	ctx := context.Background()
	spans, pin, err := r.e.ReadSpans(ctx, "a", 5, 10)
	if !errors.Is(err, io.EOF) || len(spans) != 0 || pin != nil {
		t.Fatalf("ReadSpans at the end = %+v, %v, %v; want io.EOF", spans, pin, err)
	}
	if _, _, err := r.e.ReadSpans(ctx, "missing", 0, 10); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadSpans of a missing file: %v", err)
	}
}
