package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestConcurrentReadersAndWriters runs many goroutines over overlapping and
// disjoint ranges while a tiny cache evicts and writes back. Each goroutine
// owns some 8-byte words of a shared file and its own file; every word it
// reads back must be the last value it wrote there.
func TestConcurrentReadersAndWriters(t *testing.T) {
	r := newRig(t, 4096, 12, func(c *Config) {
		c.Dir = filepath.Join(shmDir(t), "cache")
		c.Tunables = Tunables{WriteBackThreads: 3, DirtyHigh: 30, DirtyLow: 10, EvictHigh: 60, EvictLow: 40,
			WriteWindow: WriteWindow{Multiplier: -1}}
	})
	const workers, words, rounds = 12, 6 * 4096 / 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentWorker(r.e, w, workers, words, rounds)
		}()
	}
	stop := make(chan struct{})
	go func() { // keep flushing and evicting under the workers
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				r.e.EvictPath(context.Background(), "shared")
			}
		}
	}()
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := r.e.Stats(); s.Evictions == 0 || s.WriteBackBytes == 0 || s.DirtyBytes != 0 {
		t.Fatalf("eviction and write-back did not both run: %+v", s)
	}
}

// concurrentWorker writes words w, w+n, w+2n... of "shared" (interleaved with
// the other workers, so extents are shared) and ranges of its own file, and
// checks both after every write.
func concurrentWorker(e *Engine, w, n, words, rounds int) error {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(w), 3))
	own := fmt.Sprintf("own/%d", w)
	mine := map[int]uint64{}
	ownData := make([]byte, 3*4096)
	for round := range rounds {
		word := w + n*rng.IntN(words/n)
		v := uint64(w)<<32 | uint64(round+1)
		if _, err := e.WriteAt(ctx, "shared", binary.LittleEndian.AppendUint64(nil, v), int64(word*8)); err != nil {
			return err
		}
		mine[word] = v
		off := rng.IntN(len(ownData) - 100)
		chunk := bytes.Repeat([]byte{byte(round)}, 1+rng.IntN(len(ownData)-off-1))
		copy(ownData[off:], chunk)
		if _, err := e.WriteAt(ctx, own, chunk, int64(off)); err != nil {
			return err
		}
		if err := checkWords(e, mine); err != nil {
			return fmt.Errorf("worker %d round %d: %w", w, round, err)
		}
		got := make([]byte, off+len(chunk))
		if _, err := e.ReadAt(ctx, own, got, 0); err != nil {
			return err
		}
		if !bytes.Equal(got, ownData[:len(got)]) {
			return fmt.Errorf("worker %d round %d: own file differs at %d", w, round, firstDiff(got, ownData))
		}
	}
	return nil
}

// checkWords checks a few of the words, in random order.
func checkWords(e *Engine, mine map[int]uint64) error {
	b := make([]byte, 8)
	checked := 0
	for word, v := range mine {
		if checked++; checked > 8 {
			return nil
		}
		if _, err := e.ReadAt(context.Background(), "shared", b, int64(word*8)); err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint64(b); got != v {
			return fmt.Errorf("word %d = %#x, want %#x", word, got, v)
		}
	}
	return nil
}

// TestConcurrentMissesCopyUpOnce proves that concurrent readers of the same
// missing extent share a single copy-up, by counting backing reads. The
// backing reads wait at a gate until every reader is waiting for a copy-up
// in flight, so the readers overlap the copy-ups however the machine
// schedules them.
func TestConcurrentMissesCopyUpOnce(t *testing.T) {
	const es, extents, readers = 1 << 16, 4, 32
	var g *gate
	r := newRig(t, es, 8, func(c *Config) { g = newGate(c.Backing, es); c.Backing = g })
	// A failed test must not leave readers at the gate: closing the engine
	// waits for them.
	t.Cleanup(g.release)
	data := bytes.Repeat([]byte("0123456789abcdef"), extents*es/16)
	r.writeBacking("big", data)
	var wg sync.WaitGroup
	read := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 100)
			off := int64(i%extents)*es + 7
			if _, err := r.e.ReadAt(context.Background(), "big", b, off); err != nil || !bytes.Equal(b, data[off:off+100]) {
				t.Errorf("read at %d: %v", off, err)
			}
		}()
	}
	// One reader per extent first: with at most these four readers and two
	// read-aheads taking slots, no copy-up can evict another. Once a read of
	// every extent waits at the gate, every extent has its placeholder.
	for i := range extents {
		read(i)
	}
	waitFor(t, func() bool { return g.waiting() == extents })
	for i := extents; i < readers; i++ {
		read(i)
	}
	waitFor(t, func() bool { return parkedReaders() >= readers })
	g.release()
	wg.Wait()
	if got := r.backingReads(); got != extents {
		t.Fatalf("backing reads = %d, want %d (one per extent)", got, extents)
	}
	// Each extent is one miss; every reader that came after the first four
	// found its extent being copied up, and is a hit.
	if s := r.e.Stats(); s.Misses != extents || s.Hits < readers-extents {
		t.Fatalf("misses, hits = %d, %d; want %d, at least %d", s.Misses, s.Hits, extents, readers-extents)
	}
}
