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

	"github.com/burstcache/burstcache/cacheserver/backing"
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
// missing extent share a single copy-up, by counting backing reads.
func TestConcurrentMissesCopyUpOnce(t *testing.T) {
	r := newRig(t, 1<<16, 8, nil)
	data := bytes.Repeat([]byte("0123456789abcdef"), 4*4096) // 4 extents
	r.writeBacking("big", data)
	r.faulty.SetLatency(backing.OpReadAt, 30*time.Millisecond)
	r.faulty.SetLatency(backing.OpCopyRange, 30*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 100)
			off := int64(i%4)*(1<<16) + 7
			if _, err := r.e.ReadAt(context.Background(), "big", b, off); err != nil || !bytes.Equal(b, data[off:off+100]) {
				t.Errorf("read at %d: %v", off, err)
			}
		}()
	}
	wg.Wait()
	if got := r.backingReads(); got != 4 {
		t.Fatalf("backing reads = %d, want 4 (one per extent)", got)
	}
	// Each extent is one miss; every read not served by its own copy-up is
	// a hit (read-ahead may copy up an extent before any reader asks).
	if s := r.e.Stats(); s.Misses != 4 || s.Hits < 28 {
		t.Fatalf("misses, hits = %d, %d; want 4, at least 28", s.Misses, s.Hits)
	}
}
