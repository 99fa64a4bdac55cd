package client

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Flush, which the mount calls at every close(2), forgets what the client
// knew of the file. Other descriptors of the same file on the node go on
// reading and writing meanwhile: what they do must not depend on that
// knowledge being there.

// TestWriteAfterAnotherCloseKeepsTheSize writes to a file whose size the
// client forgot at a close. The write is inside the file: it tells the
// client nothing of where the file ends, and a read past it must still see
// the rest of the file.
func TestWriteAfterAnotherCloseKeepsTheSize(t *testing.T) {
	f, _ := setup(t, 2)
	ctx := context.Background()
	create(t, f, "f")
	want := randomData(8 * testExtent)
	if _, err := f.WriteAt(ctx, "f", want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	copy(want, "rewritten")
	if _, err := f.WriteAt(ctx, "f", []byte("rewritten"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f, "f", len(want)); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes after a close and a write at 0; want the %d of the file", len(got), len(want))
	}
}

// TestReadsWhileAnotherDescriptorCloses reads a file at random offsets
// from several goroutines while another one closes the file over and over.
// Every read lies inside the file and must return all its bytes: a short
// read of an O_DIRECT reader leaves whatever its buffer held before, and
// one of the page cache makes the kernel believe the file ends there.
func TestReadsWhileAnotherDescriptorCloses(t *testing.T) {
	f, _ := setup(t, 2)
	ctx := context.Background()
	create(t, f, "f")
	const extents = 64
	want := randomData(extents * testExtent)
	if _, err := f.WriteAt(ctx, "f", want, 0); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	closer := make(chan error, 1)
	go func() {
		var err error
		for !stop.Load() && err == nil {
			err = f.Flush(ctx, "f")
		}
		closer <- err
	}()
	var wg sync.WaitGroup
	var short atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, testExtent)
			for range 2000 {
				off := rand.Int64N(extents) * testExtent
				n, err := f.ReadAt(ctx, "f", buf, off)
				if err != nil || !bytes.Equal(buf[:n], want[off:off+testExtent]) {
					short.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	if err := <-closer; err != nil {
		t.Fatal(err)
	}
	if n := short.Load(); n > 0 {
		t.Fatalf("%d of 8000 reads inside the file came back short or wrong while it was being closed", n)
	}
}
