package engine

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"
)

// writeThroughSlab writes data at off of path the way a local client does:
// into the slab file where BeginWrite says, then Commit. It falls back to
// WriteAt where BeginWrite refuses, and reports which way it went.
func writeThroughSlab(t *testing.T, e *Engine, slab *os.File, path string, data []byte, off int64) (viaSlab bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.BeginWrite(ctx, path, off, len(data))
	if errors.Is(err, ErrNoSpans) {
		if _, err := e.WriteAt(ctx, path, data, off); err != nil {
			t.Fatalf("WriteAt(%s, %d, %d): %v", path, off, len(data), err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("BeginWrite(%s, %d, %d): %v", path, off, len(data), err)
	}
	if tx.Len != len(data) {
		t.Fatalf("BeginWrite gave %d bytes for %d", tx.Len, len(data))
	}
	if _, err := slab.WriteAt(data, tx.Off); err != nil {
		tx.Commit(false)
		t.Fatal(err)
	}
	tx.Commit(true)
	return true
}

// TestBeginWriteMatchesWriteAt runs random writes through the slab, random
// reads, evictions, aborted writes and restarts, against a model, and
// checks the backing files after a flush.
func TestBeginWriteMatchesWriteAt(t *testing.T) {
	const es = 4096
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := newRig(t, es, 12, func(c *Config) { c.Tunables.WriteWindow.Multiplier = -1 })
		ctx := context.Background()
		models := map[string][]byte{"old": make([]byte, 5*es+100), "new": nil}
		for i := range models["old"] {
			models["old"][i] = byte(rng.Uint32())
		}
		r.writeBacking("old", models["old"])
		slab, err := os.OpenFile(r.e.SlabFile(), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		viaSlab := 0
		for op := range 300 {
			p := []string{"old", "new"}[rng.IntN(2)]
			switch k := rng.IntN(10); {
			case k < 6:
				idx, in := rng.Int64N(8), rng.Int64N(es)
				n := rng.Int64N(es-in) + 1
				if rng.IntN(3) == 0 {
					in, n = 0, es
				}
				data := make([]byte, n)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				off := idx*es + in
				if writeThroughSlab(t, r.e, slab, p, data, off) {
					viaSlab++
				}
				m := models[p]
				if end := off + n; int64(len(m)) < end {
					m = append(m, make([]byte, end-int64(len(m)))...)
				}
				copy(m[off:], data)
				models[p] = m
			case k == 6:
				// An aborted write leaves the file as it was.
				if tx, err := r.e.BeginWrite(ctx, p, 0, es); err == nil {
					tx.Commit(false)
				}
			case k == 7:
				if err := r.e.EvictPath(ctx, p); err != nil {
					t.Fatal(err)
				}
			case k == 8 && op%5 == 0:
				if err := r.e.Sync(ctx, p); err != nil {
					t.Fatal(err)
				}
				slab.Close()
				r.restart()
				if slab, err = os.OpenFile(r.e.SlabFile(), os.O_RDWR, 0); err != nil {
					t.Fatal(err)
				}
			default:
				if m := models[p]; len(m) > 0 && !bytes.Equal(r.readAll(p), m) {
					t.Fatalf("seed %d op %d: %s differs from the model", seed, op, p)
				}
			}
		}
		slab.Close()
		if err := r.e.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for p, m := range models {
			if got := r.backingFile(p); !bytes.Equal(got, m) {
				t.Fatalf("seed %d: backing %s (%d bytes) differs from the model (%d bytes)", seed, p, len(got), len(m))
			}
		}
		if viaSlab == 0 {
			t.Fatalf("seed %d: no write went through the slab", seed)
		}
	}
}

func TestBeginWriteRefusesWhatNeedsARead(t *testing.T) {
	const es = 4096
	r := newRig(t, es, 8, nil)
	r.writeBacking("f", bytes.Repeat([]byte("b"), 2*es))
	ctx := context.Background()
	for name, tc := range map[string]struct {
		off int64
		n   int
	}{
		"partial over backing data": {off: 10, n: 100},
		"across two extents":        {off: es - 10, n: 20},
		"empty":                     {off: 0, n: 0},
	} {
		if tx, err := r.e.BeginWrite(ctx, "f", tc.off, tc.n); !errors.Is(err, ErrNoSpans) {
			if tx != nil {
				tx.Commit(false)
			}
			t.Errorf("%s: BeginWrite = %v, want ErrNoSpans", name, err)
		}
	}
}
