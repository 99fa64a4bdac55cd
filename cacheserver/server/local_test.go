package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

func same(_ int, c server.Cache) server.Cache { return c }

// pinned sums the slots local readers hold on engines.
func pinned(engines []*engine.Engine) int64 {
	var n int64
	for _, e := range engines {
		n += e.Stats().PinnedSlots
	}
	return n
}

func waitUnpinned(t *testing.T, engines []*engine.Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pinned(engines) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d slots still pinned after 10s", pinned(engines))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLocalReadsComeFromTheSlab reads a file through servers on Unix
// sockets, whose slab files the client reads itself, and through the same
// servers over their sockets, and checks both against the data.
func TestLocalReadsComeFromTheSlab(t *testing.T) {
	const es = 1 << 16
	backingDir := t.TempDir()
	data, _, engines := startOn(t, "unix", backingDir, 2, same)
	ctx := context.Background()
	local, err := client.New(client.Options{Servers: data, ExtentSize: es})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := client.New(client.Options{Servers: data, ExtentSize: es, RemoteReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()

	want := make([]byte, 5*es+777)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	if _, err := local.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := local.WriteAt(ctx, "f", want, 0); err != nil {
		t.Fatal(err)
	}
	if err := local.Flush(ctx, "f"); err != nil {
		t.Fatal(err)
	}

	// An aligned extent comes back as a place in the slab, pinned.
	buf := make([]byte, es)
	n, fd, err := local.ReadAtFile(ctx, "f", buf, es)
	if err != nil || n != es || fd == nil {
		t.Fatalf("ReadAtFile of extent 1 = %d, %v, %v; want a slab range", n, fd, err)
	}
	got := make([]byte, fd.Len)
	if _, err := syscall.Pread(int(fd.Fd), got, fd.Off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want[es:2*es]) {
		t.Fatal("the slab range does not hold extent 1")
	}
	if pinned(engines) != 1 {
		t.Fatalf("%d slots pinned while the range is read, want 1", pinned(engines))
	}
	fd.Release()
	// The pin stays: it is the client's lease on the extent.
	if pinned(engines) != 1 {
		t.Fatalf("%d slots pinned after the read, want the lease's 1", pinned(engines))
	}

	for _, c := range []*client.FS{local, remote} {
		for range 100 {
			off := rng.Int64N(int64(len(want)) + 10)
			p := make([]byte, rng.IntN(3*es)+1)
			n, err := c.ReadAt(ctx, "f", p, off)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("ReadAt(%d, %d): %v", off, len(p), err)
			}
			end := min(off+int64(len(p)), int64(len(want)))
			if off < end && !bytes.Equal(p[:n], want[off:end]) {
				t.Fatalf("ReadAt(%d, %d) returned wrong bytes", off, len(p))
			}
		}
	}
	local.Close()
	waitUnpinned(t, engines)
}

// TestPinsOfAClosedConnectionAreReleased proves that a client that goes
// away without releasing its pins does not hold the cache's slots.
func TestPinsOfAClosedConnectionAreReleased(t *testing.T) {
	const es = 1 << 16
	backingDir := t.TempDir()
	data, _, engines := startOn(t, "unix", backingDir, 1, same)
	writeBackingFile(t, backingDir, "f", bytes.Repeat([]byte("x"), 3*es))
	ctx := context.Background()
	c := wire.NewClient(data[0], wire.ClientOptions{Conns: 1})
	for i := range int64(3) {
		args := (&wire.Encoder{}).String("f").Int64(i * es).Uint32(es)
		if _, err := c.Do(ctx, &wire.Call{Op: wire.OpReadSpans, Cred: ident.Process(), Args: args.Bytes()}); err != nil {
			t.Fatal(err)
		}
	}
	if got := pinned(engines); got != 3 {
		t.Fatalf("%d slots pinned, want 3", got)
	}
	c.Close()
	waitUnpinned(t, engines)
}

// TestSlabFileOnlyOverUnixSockets checks that a server hands out its slab
// descriptor to a client on a Unix socket, and refuses spans over TCP.
func TestSlabFileOnlyOverUnixSockets(t *testing.T) {
	backingDir := t.TempDir()
	unix, _, engines := startOn(t, "unix", backingDir, 1, same)
	f, _, err := wire.FetchFile(context.Background(), unix[0], wire.Credentials{}, ident.Process(), wire.OpSlabFile, nil)
	if err != nil {
		t.Fatalf("FetchFile over a Unix socket: %v", err)
	}
	defer f.Close()
	var st, want syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(engines[0].SlabFile(), &want); err != nil {
		t.Fatal(err)
	}
	if st.Ino != want.Ino || st.Dev != want.Dev {
		t.Fatal("the descriptor is not of the slab file")
	}

	tcp, _ := startEngineServers(t, backingDir, 1)
	if _, _, err := wire.FetchFile(context.Background(), tcp[0], wire.Credentials{}, ident.Process(), wire.OpSlabFile, nil); !errors.Is(err, wire.ErrNotLocal) {
		t.Fatalf("FetchFile over TCP: %v, want ErrNotLocal", err)
	}
	c := wire.NewClient(tcp[0], wire.ClientOptions{})
	defer c.Close()
	args := (&wire.Encoder{}).String("f").Int64(0).Uint32(10)
	if _, err := c.Do(context.Background(), &wire.Call{Op: wire.OpReadSpans, Cred: ident.Process(), Args: args.Bytes()}); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("OpReadSpans over TCP: %v, want EOPNOTSUPP", err)
	}
}

func writeBackingFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLocalWritesGoThroughPipes writes the way a local mount does: the
// client puts the bytes into a pipe of the server's and the server moves
// them into its slab. The client's slab descriptor cannot write, and a
// write through a pipe that does not hold what it says fails and closes the
// pipe, as the death of the server closes all of them: the client's next
// write through it fails (EPIPE) instead of landing anywhere.
func TestLocalWritesGoThroughPipes(t *testing.T) {
	const es = 1 << 16
	backingDir := t.TempDir()
	data, ctl, _ := startOn(t, "unix", backingDir, 1, same)
	ctx := context.Background()
	slab, _, err := wire.FetchFile(ctx, data[0], wire.Credentials{}, ident.Process(), wire.OpSlabFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slab.Close()
	if _, err := slab.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("a client wrote the slab with the descriptor the server handed it")
	}
	pipe := func() (*os.File, uint64) {
		t.Helper()
		w, meta, err := wire.FetchFile(ctx, data[0], wire.Credentials{}, ident.Process(), wire.OpWritePipe, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return w, wire.NewDecoder(meta).Uint64()
	}
	c := wire.NewClient(data[0], wire.ClientOptions{Conns: 1})
	defer c.Close()
	piped := func(off int64, n int, id uint64) error {
		args := (&wire.Encoder{}).String("f").Int64(off).Uint32(uint32(n)).Uint64(id)
		_, err := c.Do(ctx, &wire.Call{Op: wire.OpWritePiped, Cred: ident.Process(), Args: args.Bytes()})
		return err
	}

	w, id := pipe()
	want := bytes.Repeat([]byte("pipe"), es/4)
	for _, off := range []int64{0, es} { // the pipe serves write after write
		if _, err := w.Write(want); err != nil {
			t.Fatal(err)
		}
		if err := piped(off, es, id); err != nil {
			t.Fatalf("piped write at %d: %v", off, err)
		}
	}
	if err := piped(0, es, id^1); !errors.Is(err, syscall.EBADF) {
		t.Errorf("a write through a pipe the server does not know: %v, want EBADF", err)
	}

	short, sid := pipe()
	if _, err := short.Write([]byte("short")); err != nil {
		t.Fatal(err)
	}
	if err := piped(2*es, es, sid); err == nil {
		t.Fatal("a write of more bytes than the pipe holds succeeded")
	}
	if _, err := short.Write([]byte("late")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("a write into a pipe the server closed: %v, want EPIPE", err)
	}

	if _, err := control.NewClient(ctl[0], nil, nil).Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(backingDir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(append([]byte{}, want...), want...)) {
		t.Fatalf("backing file has %d bytes, want the two piped extents only", len(got))
	}
}

// plainCache hides that the engine can lend its slab.
type plainCache struct{ server.Cache }

// TestLocalClientFallsBackWithoutASlab checks that a client on a Unix
// socket reads and writes through the socket when the server's cache does
// not lend its slab file.
func TestLocalClientFallsBackWithoutASlab(t *testing.T) {
	const es = 1 << 16
	backingDir := t.TempDir()
	data, _, engines := startOn(t, "unix", backingDir, 2, func(_ int, c server.Cache) server.Cache { return plainCache{c} })
	ctx := context.Background()
	c, err := client.New(client.Options{Servers: data, ExtentSize: es})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := bytes.Repeat([]byte("0123456789abcdef"), 3*es/16)
	if _, err := c.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAt(ctx, "f", want, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	n, fd, err := c.ReadAtFile(ctx, "f", got, 0)
	if err != nil && !errors.Is(err, io.EOF) || fd != nil || !bytes.Equal(got[:n], want) {
		t.Fatalf("ReadAtFile = %d, %v, %v; want the bytes in the buffer", n, fd, err)
	}
	if pinned(engines) != 0 {
		t.Fatal("slots pinned by a server that does not lend its slab")
	}
}

// TestLocalReadsAndWritesUnderContention runs writers and readers of
// overlapping extents through local clients at once, on two servers of 64
// extents each that must evict and write back meanwhile (the file has 192
// extents), and checks the backing
// file after a flush: no deadlock between open writes, pins and writers
// waiting for space, and no lost write.
func TestLocalReadsAndWritesUnderContention(t *testing.T) {
	const es, extents, workers, rounds = 1 << 16, 192, 6, 40
	backingDir := t.TempDir()
	data, ctl, engines := startOn(t, "unix", backingDir, 2, same)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(client.Options{Servers: data, ExtentSize: es})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	// Worker w owns extents w, w+workers, ...; the last round's byte wins.
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			buf := make([]byte, es)
			for round := range rounds {
				e := int64(w + workers*rng.IntN(extents/workers))
				if _, err := c.WriteAt(ctx, "f", bytes.Repeat([]byte{byte(round)}, es), e*es); err != nil {
					errs <- err
					return
				}
				other := rng.Int64N(extents)
				if _, err := c.ReadAt(ctx, "f", buf, other*es); err != nil && !errors.Is(err, io.EOF) {
					errs <- err
					return
				}
			}
			// Leave a known last value in every extent this worker owns.
			for e := int64(w); e < extents; e += workers {
				if _, err := c.WriteAt(ctx, "f", bytes.Repeat([]byte{byte(e)}, es), e*es); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := c.Flush(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	for _, a := range ctl {
		if _, err := control.NewClient(a, nil, nil).Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.Join(backingDir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != extents*es {
		t.Fatalf("backing file has %d bytes, want %d", len(got), extents*es)
	}
	for e := range extents {
		if !bytes.Equal(got[e*es:(e+1)*es], bytes.Repeat([]byte{byte(e)}, es)) {
			t.Fatalf("extent %d of the backing file is wrong", e)
		}
	}
	// The client's leases pin slots until it closes.
	c.Close()
	waitUnpinned(t, engines)
}

// TestPinsOutliveAShutdown stops a server while a client holds pins. The
// client may still be reading those slots, not yet aware that Shutdown
// closed its connection, while requests of other connections finish: the
// slots must not be free for them to reuse.
func TestPinsOutliveAShutdown(t *testing.T) {
	const es = 1 << 16
	backingDir := t.TempDir()
	writeBackingFile(t, backingDir, "f", bytes.Repeat([]byte("x"), 3*es))
	data, _, e, s := startServer(t, "unix", backingDir, 0, 1, same, sameStore)
	ctx := context.Background()
	c := wire.NewClient(data, wire.ClientOptions{Conns: 1})
	defer c.Close()
	for i := range int64(3) {
		args := (&wire.Encoder{}).String("f").Int64(i * es).Uint32(es)
		if _, err := c.Do(ctx, &wire.Call{Op: wire.OpReadSpans, Cred: ident.Process(), Args: args.Bytes()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.Stats().PinnedSlots; got != 3 {
		t.Fatalf("%d slots pinned after the shutdown, want 3", got)
	}
}
