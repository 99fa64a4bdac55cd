package client

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/ident"
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
	if wrap != nil {
		cache = wrap(cache)
	}
	s := server.New(server.Config{Cache: cache, NS: ns, Cred: ident.Process(),
		Info: control.ServerInfo{Instance: "t", Servers: 1, ExtentSize: localExtent}, Log: slog.New(slog.DiscardHandler)})
	dl, err := net.Listen("unix", filepath.Join(t.TempDir(), "data.sock"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	servertest.Serve(t, s, dl, cl, func() { _ = e.Close() }, func() { _ = ns.Close() })
	return dl.Addr().String()
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

// TestSlabWriteOfABrokenConnectionGoesThroughTheSocket breaks the
// connection that holds a write into the slab, before the client writes
// the bytes and before it commits them. The server cancelled the write with
// the connection and may reuse its slot, so the client must not write
// there, and must not fail the write either: it sends the bytes through the
// socket.
func TestSlabWriteOfABrokenConnectionGoesThroughTheSocket(t *testing.T) {
	for name, breakAt := range map[string]func(l *localSlab, brk func()){
		"before the slab write": func(l *localSlab, brk func()) { l.afterBegin = brk },
		"before the commit":     func(l *localSlab, brk func()) { l.beforeCommit = brk },
	} {
		t.Run(name, func(t *testing.T) {
			f := newWithFile(t, startLocal(t, t.TempDir()))
			ctx := context.Background()
			l := f.local[0]
			broke := 0
			breakAt(l, func() {
				broke++
				_ = l.srv.Close()
			})
			want := bytes.Repeat([]byte("w"), localExtent)
			if _, err := f.WriteAt(ctx, "f", want, 0); err != nil {
				t.Fatalf("WriteAt: %v", err)
			}
			l.afterBegin, l.beforeCommit = nil, nil
			if broke != 1 {
				t.Fatalf("the connection broke %d times, want 1", broke)
			}
			got := make([]byte, localExtent)
			if n, err := f.ReadAt(ctx, "f", got, 0); n != localExtent || !bytes.Equal(got, want) {
				t.Fatalf("ReadAt = %d, %v; the bytes written are not there", n, err)
			}
		})
	}
}
