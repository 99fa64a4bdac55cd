package servertest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
	"github.com/burstcache/burstcache/cacheserver/server"
)

// Instance is a set of running servers over one backing directory.
type Instance struct {
	Backing string
	// Data and Control are the servers' addresses, in index order.
	Data, Control []string
	Caches        []*MemCache
	Servers       []*server.Server

	opts Options
}

// Options say what servers to start.
type Options struct {
	Servers    int
	ExtentSize int64
	Secret     string
	// ActAsCaller runs backing-store operations as the caller.
	ActAsCaller bool
	// CallerUIDs and CallerGIDs are the ids a server acting as the caller
	// may act as (server.Config).
	CallerUIDs, CallerGIDs ident.Ranges
	// LoadBalanced serves the instance read-only, whole files per server.
	LoadBalanced bool
	// WrapNS, if set, wraps each server's namespace, for tests that make
	// backing-store operations fail.
	WrapNS func(namespace.FS) namespace.FS
	// StateDir, if set, holds each server's log of hidden names, which
	// then outlives a Restart.
	StateDir string
}

// Start starts servers over backing with MemCache engines; they stop when
// the test ends.
func Start(t testing.TB, backing string, opts Options) *Instance {
	t.Helper()
	in := &Instance{Backing: backing, opts: opts}
	for i := range opts.Servers {
		in.Data = append(in.Data, "")
		in.Control = append(in.Control, "")
		in.Caches = append(in.Caches, nil)
		in.Servers = append(in.Servers, nil)
		in.start(t, i, listen(t, "127.0.0.1:0"))
	}
	return in
}

// Restart stops server i, as a crash would, and starts a new server with
// an empty MemCache on the same data address: whatever the old one held,
// dirty data included, is gone, as are writes of a real server that no
// commit of its index covered.
func (in *Instance) Restart(t testing.TB, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = in.Servers[i].Shutdown(ctx)
	in.start(t, i, listen(t, in.Data[i]))
}

// Stop stops server i, as the loss of its node would: its data address
// refuses connections until Restart.
func (in *Instance) Stop(t testing.TB, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = in.Servers[i].Shutdown(ctx)
}

// start starts server i of in on data.
func (in *Instance) start(t testing.TB, i int, data net.Listener) {
	t.Helper()
	opts := in.opts
	ns, err := posixns.New(in.Backing)
	if err != nil {
		t.Fatal(err)
	}
	mc := NewMemCache(in.Backing)
	var sns namespace.FS = ns
	if opts.WrapNS != nil {
		sns = opts.WrapNS(ns)
	}
	hidden := ""
	if opts.StateDir != "" {
		hidden = filepath.Join(opts.StateDir, fmt.Sprintf("server-%d-%s", i, server.HiddenNamesFile))
	}
	s, err := server.New(server.Config{
		Cache: mc, NS: sns, Cred: ident.Process(), Secret: []byte(opts.Secret), ActAsCaller: opts.ActAsCaller, LoadBalanced: opts.LoadBalanced,
		CallerUIDs: opts.CallerUIDs, CallerGIDs: opts.CallerGIDs,
		Info:        control.ServerInfo{Instance: "test", Index: i, Servers: opts.Servers, ExtentSize: opts.ExtentSize},
		HiddenNames: hidden, Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctl := listen(t, "127.0.0.1:0")
	Serve(t, s, data, ctl, func() { _ = ns.Close() })
	in.Data[i], in.Control[i] = data.Addr().String(), ctl.Addr().String()
	in.Caches[i], in.Servers[i] = mc, s
}

// Serve serves s on data and ctl until the test ends; then it shuts s
// down and runs after, in order.
func Serve(t testing.TB, s *server.Server, data, ctl net.Listener, after ...func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Serve(data, ctl) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Logf("serving ended: %v", err)
		}
		for _, fn := range after {
			fn()
		}
	})
}

func listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
