package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
)

const localExtent = 1 << 16

// startLocal starts one server with a real engine on a Unix socket, so
// that a client reaches it by the local data path.
func startLocal(t *testing.T, backingDir string) string {
	t.Helper()
	return startLocalWith(t, backingDir, nil)
}

// startLocalWith is startLocal with the server's cache wrapped by wrap.
func startLocalWith(t *testing.T, backingDir string, wrap func(server.Cache) server.Cache) string {
	t.Helper()
	addr, _ := startLocalServer(t, backingDir, localServer{wrap: wrap, servers: 1})
	return addr
}

// localServer says what server startLocalServer starts.
type localServer struct {
	// wrap, if set, wraps the server's cache, and wrapNS its namespace.
	wrap   func(server.Cache) server.Cache
	wrapNS func(namespace.FS) namespace.FS
	// index and servers place the server in its instance.
	index, servers int
	loadBalanced   bool
}

// startLocalServer starts a server with a real engine on a Unix socket and
// returns its address and the server, which stops with the test.
func startLocalServer(t *testing.T, backingDir string, o localServer) (string, *server.Server) {
	t.Helper()
	tun := engine.Tunables{}
	e, err := engine.Open(engine.Config{Dir: t.TempDir(), Backing: backing.NewDir(backingDir), ExtentSize: localExtent,
		Capacity: 64 * localExtent, Tunables: tun, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := posixns.New(backingDir)
	if err != nil {
		t.Fatal(err)
	}
	cache := server.EngineCache(e, tun)
	if o.wrap != nil {
		cache = o.wrap(cache)
	}
	var sns namespace.FS = ns
	if o.wrapNS != nil {
		sns = o.wrapNS(ns)
	}
	s, err := server.New(server.Config{Cache: cache, NS: sns, Cred: ident.Process(), LoadBalanced: o.loadBalanced,
		Info: control.ServerInfo{Instance: "t", Index: o.index, Servers: o.servers, ExtentSize: localExtent}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := net.Listen("unix", filepath.Join(t.TempDir(), "data.sock"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	servertest.Serve(t, s, dl, cl, func() { _ = e.Close() }, func() { _ = ns.Close() })
	return dl.Addr().String(), s
}

// newWithFile returns a client of the server at addr, closed with the test,
// on which file "f" was just created.
func newWithFile(t *testing.T, addr string) *FS {
	t.Helper()
	f, err := New(Options{Servers: []string{addr}, ExtentSize: localExtent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Create(context.Background(), "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPipeWritesFallBackToTheSocket breaks a local write the ways a
// server restart or a broken connection does: the server no longer knows
// the client's pipe, the pipe's other end is closed, or the connection is
// gone. The write must neither fail nor be lost: it goes through the
// socket, and the pipe is not used again.
func TestPipeWritesFallBackToTheSocket(t *testing.T) {
	for name, tc := range map[string]struct {
		breakIt func(l *localSlab, p *writePipe)
		// pipeOK: the pipe itself is sound, and may serve again.
		pipeOK bool
	}{
		"pipe unknown to the server": {breakIt: func(_ *localSlab, p *writePipe) { p.id ^= 1 }},
		"pipe closed by the server":  {breakIt: func(_ *localSlab, p *writePipe) { p.fd = brokenPipe(t) }},
		"connection gone":            {breakIt: func(l *localSlab, _ *writePipe) { _ = l.srv.Close() }, pipeOK: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := newWithFile(t, startLocal(t, t.TempDir()))
			ctx := context.Background()
			l := f.local[0]
			first := bytes.Repeat([]byte("1"), localExtent)
			if _, err := f.WriteAt(ctx, "f", first, 0); err != nil {
				t.Fatal(err)
			}
			if len(l.pipes.idle) != 1 {
				t.Fatalf("%d idle pipes after a local write, want 1", len(l.pipes.idle))
			}
			p := l.pipes.idle[0]
			tc.breakIt(l, p)
			want := bytes.Repeat([]byte("w"), localExtent)
			if _, err := f.WriteAt(ctx, "f", want, localExtent); err != nil {
				t.Fatalf("WriteAt: %v", err)
			}
			for _, q := range l.pipes.idle {
				if q == p && !tc.pipeOK {
					t.Error("the broken pipe is still in use")
				}
			}
			got := make([]byte, 2*localExtent)
			if n, err := f.ReadAt(ctx, "f", got, 0); n != len(got) || !bytes.Equal(got, append(first, want...)) {
				t.Fatalf("ReadAt = %d, %v; the bytes written are not there", n, err)
			}
		})
	}
}

// brokenPipe returns the write end of a pipe whose read end is closed.
func brokenPipe(t *testing.T) int {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	unix.Close(fds[0])
	t.Cleanup(func() { unix.Close(fds[1]) })
	return fds[1]
}

// TestPipeWriteOutlivesItsCaller writes through a pipe for a caller whose
// context is cancelled: the server reads the write from the caller's
// buffer until it has moved it, so the write must run to its end rather
// than return and let the buffer be reused under the server.
func TestPipeWriteOutlivesItsCaller(t *testing.T) {
	f := newWithFile(t, startLocal(t, t.TempDir()))
	first := bytes.Repeat([]byte("1"), localExtent)
	if _, err := f.WriteAt(context.Background(), "f", first, 0); err != nil {
		t.Fatal(err)
	}
	if len(f.local[0].pipes.idle) != 1 {
		t.Fatal("no idle pipe after a local write")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	want := bytes.Repeat([]byte("c"), localExtent)
	if _, err := f.WriteAt(ctx, "f", want, 0); err != nil {
		t.Fatalf("a piped write of a cancelled caller: %v, want it done", err)
	}
	got := make([]byte, localExtent)
	if _, err := f.ReadAt(context.Background(), "f", got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAt: %v; the write is not there", err)
	}
}

// firstStall holds the first call through it until it is let go,
// whatever happens to the caller meanwhile, as a server handler waiting for
// space is held: entered is closed when that call arrives, done once it
// returned.
type firstStall struct {
	first, release sync.Once
	entered, freed chan struct{}
	done           chan struct{}
}

func newFirstStall() *firstStall {
	return &firstStall{entered: make(chan struct{}), freed: make(chan struct{}), done: make(chan struct{})}
}

// hold runs call, the first time only once the stall is let go.
func (s *firstStall) hold(call func()) {
	first := false
	s.first.Do(func() { first = true })
	if !first {
		call()
		return
	}
	close(s.entered)
	<-s.freed
	defer close(s.done)
	call()
}

// letGo lets the held call go on.
func (s *firstStall) letGo() { s.release.Do(func() { close(s.freed) }) }

// await returns the caller's result from result. A caller may return at
// once, or wait for the held call itself: that one is let go after a
// second.
func (s *firstStall) await(result <-chan error) error {
	select {
	case err := <-result:
		return err
	case <-time.After(time.Second):
		s.letGo()
		return <-result
	}
}

// stalledBegins stalls the first piped write a server prepares; done is
// closed once the write holds its extent.
type stalledBegins struct {
	localCache
	*firstStall
}

func (s stalledBegins) BeginWrite(ctx context.Context, path string, off int64, n int) (tx *engine.WriteTx, err error) {
	s.hold(func() { tx, err = s.localCache.BeginWrite(ctx, path, off, n) })
	return tx, err
}

// TestBrokenPipeWriteLetsGoOfItsBuffer breaks the connection of a piped
// write while the server has not yet moved the bytes. The pipe refers to
// the caller's buffer, and the server's handler goes on after the call
// failed: if the write returned while the server could still read the
// pipe, the buffer's next contents would land in the file. The write may
// wait for the server instead, which the test lets go after a second.
func TestBrokenPipeWriteLetsGoOfItsBuffer(t *testing.T) {
	t.Run("reading the pipe back", brokenPipeWrite)
	t.Run("waiting for the server", func(t *testing.T) {
		defer func(orig string) { procFD = orig }(procFD)
		procFD = filepath.Join(t.TempDir(), "%d")
		brokenPipeWrite(t)
	})
}

func brokenPipeWrite(t *testing.T) {
	stall := newFirstStall()
	addr := startLocalWith(t, t.TempDir(), func(c server.Cache) server.Cache {
		return stalledBegins{c.(localCache), stall}
	})
	f := newWithFile(t, addr)
	ctx := context.Background()
	buf := bytes.Repeat([]byte("w"), localExtent)
	want := bytes.Clone(buf)
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(ctx, "f", buf, 0)
		done <- err
	}()
	<-stall.entered
	_ = f.local[0].srv.Close()
	if err := stall.await(done); err != nil {
		t.Fatalf("WriteAt: %v", err)
	}
	// The buffer serves another write now.
	copy(buf, bytes.Repeat([]byte("x"), localExtent))
	stall.letGo()
	<-stall.done
	got := make([]byte, localExtent)
	if _, err := f.ReadAt(ctx, "f", got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the file holds %q..., want %q...: the server read the buffer after the write returned", got[:8], want[:8])
	}
}

// stalledCacheWrites stalls the first write the server's cache gets.
type stalledCacheWrites struct {
	localCache
	*firstStall
}

func (s stalledCacheWrites) WriteAt(ctx context.Context, path string, p []byte, off int64) (n int, err error) {
	s.hold(func() { n, err = s.localCache.WriteAt(ctx, path, p, off) })
	return n, err
}

// TestInterruptedWriteKeepsItsPlace cancels the context of a write that
// the server is still carrying out, then writes the same range again. Had
// the first write returned (EINTR) while the server still held it, it
// could land after the second and undo it.
func TestInterruptedWriteKeepsItsPlace(t *testing.T) {
	stall := newFirstStall()
	addr := startLocalWith(t, t.TempDir(), func(c server.Cache) server.Cache {
		return stalledCacheWrites{c.(localCache), stall}
	})
	f := newWithFile(t, addr)
	ctx, interrupt := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(ctx, "f", []byte("first"), 0)
		done <- err
	}()
	<-stall.entered
	interrupt()
	_ = stall.await(done) // EINTR, or done with the server's write
	if _, err := f.WriteAt(context.Background(), "f", []byte("again"), 0); err != nil {
		t.Fatal(err)
	}
	stall.letGo()
	<-stall.done
	got := make([]byte, 5)
	if _, err := f.ReadAt(context.Background(), "f", got, 0); err != nil {
		t.Fatal(err)
	}
	if string(got) != "again" {
		t.Fatalf("the file holds %q after the second write, want %q: the interrupted write landed after it", got, "again")
	}
}

// restartAfterSpans moves the server's epoch on, as a restart does, right
// after it hands out spans once armed, and counts reads through it.
type restartAfterSpans struct {
	localCache
	armed atomic.Bool
	reads atomic.Int64
}

func (r *restartAfterSpans) LeaseSpans(ctx context.Context, path string, off int64, n int) ([]engine.Span, *engine.Pin, engine.Lease, bool, error) {
	spans, pin, le, ok, err := r.localCache.LeaseSpans(ctx, path, off, n)
	if r.armed.CompareAndSwap(true, false) {
		f, ferr := os.OpenFile(r.SlotGensFile(), os.O_RDWR, 0)
		if ferr != nil {
			panic(ferr)
		}
		var b [8]byte
		_, _ = f.ReadAt(b[:], 0)
		binary.LittleEndian.PutUint64(b[:], binary.LittleEndian.Uint64(b[:])+1)
		_, _ = f.WriteAt(b[:], 0)
		_ = f.Close()
	}
	return spans, pin, le, ok, err
}

func (r *restartAfterSpans) ReadAt(ctx context.Context, path string, p []byte, off int64) (int, error) {
	r.reads.Add(1)
	return r.localCache.ReadAt(ctx, path, p, off)
}

// TestSpansOfARestartedServerAreNotTrusted has the server restart between
// handing out the places of a read in its slab and the client reading
// them: the new server may have put other extents there, so the client
// must read through the server instead.
func TestSpansOfARestartedServerAreNotTrusted(t *testing.T) {
	r := &restartAfterSpans{}
	f := newWithFile(t, startLocalWith(t, t.TempDir(), func(c server.Cache) server.Cache {
		r.localCache = c.(localCache)
		return r
	}))
	ctx := context.Background()
	want := append(bytes.Repeat([]byte("a"), localExtent), bytes.Repeat([]byte("b"), localExtent)...)
	if _, err := f.WriteAt(ctx, "f", want, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, localExtent)
	if _, err := f.ReadAt(ctx, "f", got, 0); err != nil || !bytes.Equal(got, want[:localExtent]) {
		t.Fatalf("ReadAt: %v", err)
	}
	r.armed.Store(true)
	r.reads.Store(0)
	if _, err := f.ReadAt(ctx, "f", got, localExtent); err != nil || !bytes.Equal(got, want[localExtent:]) {
		t.Fatalf("ReadAt: %v", err)
	}
	if r.armed.Load() {
		t.Fatal("the read took no spans")
	}
	if n := r.reads.Load(); n != 1 {
		t.Fatalf("%d reads through the server after a restart under the read, want 1", n)
	}
}
