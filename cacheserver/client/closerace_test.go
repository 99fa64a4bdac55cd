package client

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/server/servertest"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// Released, which the mount calls when it released its last descriptor of
// a file, forgets what the client knew of the file; an open may be under
// way meanwhile, and descriptors it opens read and write at once. What they
// do must not depend on that knowledge being there. The tests below forget
// it at every close (Flush, then Released), which is more often than the
// mount does.

// TestCloseKeepsWhatTheClientKnows closes a file while another descriptor
// of it stays open: reads through that one must not ask the metadata
// server for the size again, until the mount released the last descriptor.
func TestCloseKeepsWhatTheClientKnows(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: testExtent, Secret: "k"})
	px := startProxy(t, in.Data[0], nil, nil)
	f := connect(t, &servertest.Instance{Data: []string{px.addr}})
	ctx := context.Background()
	create(t, f, "f")
	want := randomData(2 * testExtent)
	if _, err := f.WriteAt(ctx, "f", want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	readAsking := func() (got []byte, asked bool) {
		for len(px.forwarded) > 0 {
			<-px.forwarded
		}
		got = readAll(t, f, "f", len(want))
		for len(px.forwarded) > 0 {
			if <-px.forwarded == wire.OpGetAttr {
				asked = true
			}
		}
		return got, asked
	}
	if got, asked := readAsking(); !bytes.Equal(got, want) || asked {
		t.Errorf("read after another descriptor's close: %d of %d bytes, asked the size again: %v", len(got), len(want), asked)
	}
	f.Released("f")
	if got, asked := readAsking(); !bytes.Equal(got, want) || !asked {
		t.Errorf("read after the last release: %d of %d bytes, asked the size again: %v", len(got), len(want), asked)
	}
}

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
	f.Released("f")
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
			f.Released("f")
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
