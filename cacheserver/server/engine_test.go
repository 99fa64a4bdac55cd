package server_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/placement"
	"github.com/burstcache/burstcache/cacheserver/posixns"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// startEngineServers starts n servers with real engines over one backing
// directory and returns their data and control addresses.
func startEngineServers(t testing.TB, backingDir string, n int) (data, ctl []string) {
	t.Helper()
	return startWrapped(t, backingDir, n, func(_ int, c server.Cache) server.Cache { return c })
}

// startWrapped starts n servers with real engines, each seen through wrap.
func startWrapped(t testing.TB, backingDir string, n int, wrap func(i int, c server.Cache) server.Cache) (data, ctl []string) {
	t.Helper()
	data, ctl, _ = startServers(t, "tcp", backingDir, n, wrap, sameStore)
	return data, ctl
}

func sameStore(s backing.Store) backing.Store { return s }

// startOn starts n servers with real engines, each seen through wrap, that
// serve the data path on network ("tcp" or "unix"), and returns their
// addresses and engines.
func startOn(t testing.TB, network, backingDir string, n int, wrap func(i int, c server.Cache) server.Cache) (data, ctl []string, engines []*engine.Engine) {
	t.Helper()
	return startServers(t, network, backingDir, n, wrap, sameStore)
}

// startOver starts n servers with real engines over the backing store that
// store makes of the backing directory, each engine seen through wrap.
func startOver(t testing.TB, backingDir string, n int, wrap func(i int, c server.Cache) server.Cache, store func(backing.Store) backing.Store) (data, ctl []string) {
	t.Helper()
	data, ctl, _ = startServers(t, "tcp", backingDir, n, wrap, store)
	return data, ctl
}

// startServers starts n servers with real engines over the backing store
// that store makes of the backing directory, each engine seen through
// wrap and configured further by mods, serving the data path on network.
func startServers(t testing.TB, network, backingDir string, n int, wrap func(i int, c server.Cache) server.Cache, store func(backing.Store) backing.Store, mods ...func(*engine.Config)) (data, ctl []string, engines []*engine.Engine) {
	t.Helper()
	for i := range n {
		d, c, e, _ := startServer(t, network, backingDir, i, n, wrap, store, mods...)
		data, ctl, engines = append(data, d), append(ctl, c), append(engines, e)
	}
	return data, ctl, engines
}

// startServer starts server i of n for startServers and returns its
// addresses, engine and server; it stops with the test.
func startServer(t testing.TB, network, backingDir string, i, n int, wrap func(i int, c server.Cache) server.Cache, store func(backing.Store) backing.Store, mods ...func(*engine.Config)) (data, ctl string, e *engine.Engine, s *server.Server) {
	t.Helper()
	dir, err := server.ClaimCacheDir(filepath.Join(t.TempDir(), "cache"), server.Identity{Instance: "t", Index: i, Servers: n, ExtentSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	tun := engine.Tunables{}
	cfg := engine.Config{Dir: dir, Backing: store(backing.NewDir(backingDir)), ExtentSize: 1 << 16, Capacity: 64 << 16, Tunables: tun, Logger: slog.New(slog.DiscardHandler)}
	for _, mod := range mods {
		mod(&cfg)
	}
	e, err = engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := posixns.New(backingDir)
	if err != nil {
		t.Fatal(err)
	}
	s, err = server.New(server.Config{Cache: wrap(i, server.EngineCache(e, tun)), NS: ns, Cred: ident.Process(),
		Info: control.ServerInfo{Instance: "t", Index: i, Servers: n, ExtentSize: 1 << 16}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "data.sock")
	}
	dl, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- s.Serve(dl, cl) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
		e.Close()
		ns.Close()
	})
	return dl.Addr().String(), cl.Addr().String(), e, s
}

// TestEngineServersWriteBack writes a striped file through servers with
// real engines, flushes them through the control API, and checks the
// backing file.
func TestEngineServersWriteBack(t *testing.T) {
	backingDir := t.TempDir()
	data, ctl := startEngineServers(t, backingDir, 3)
	f, err := client.New(client.Options{Servers: data, ExtentSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if err := f.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Create(ctx, "out", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 7<<16+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if _, err := f.WriteAt(ctx, "out", want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx, "out"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if n, err := f.ReadAt(ctx, "out", got, 0); n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v), differing from what was written", n, err)
	}
	var dirty int64
	for _, addr := range ctl {
		c := control.NewClient(addr, nil, nil)
		st, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dirty += st.DirtyBytes
		if res, err := c.Flush(ctx); err != nil || res.RemainingBytes != 0 {
			t.Fatalf("Flush = %+v, %v", res, err)
		}
	}
	if dirty == 0 {
		t.Errorf("no dirty data before the flush: writes did not land in the caches")
	}
	onDisk, err := os.ReadFile(filepath.Join(backingDir, "out"))
	if err != nil || !bytes.Equal(onDisk, want) {
		t.Fatalf("backing file has %d bytes (%v), want the %d written", len(onDisk), err, len(want))
	}
}

// readRecorder records the offsets a server reads from its cache.
type readRecorder struct {
	server.Cache
	mu   sync.Mutex
	offs []int64
}

func (r *readRecorder) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	r.mu.Lock()
	r.offs = append(r.offs, off)
	r.mu.Unlock()
	return r.Cache.ReadAt(ctx, p, b, off)
}

// TestPreloadReadsOnlyOwnExtents preloads a file through every server's
// control API and checks that each server asked its engine for exactly the
// extents placement gives it, so a striped preload copies each byte up once
// (whatever the engine then prefetches).
func TestPreloadReadsOnlyOwnExtents(t *testing.T) {
	backingDir := t.TempDir()
	const n, es, size = 3, 1 << 16, 10<<16 + 5
	if err := os.WriteFile(filepath.Join(backingDir, "in"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	recs := make([]*readRecorder, n)
	_, ctl := startWrapped(t, backingDir, n, func(i int, c server.Cache) server.Cache {
		recs[i] = &readRecorder{Cache: c}
		return recs[i]
	})
	l := placement.Layout{Servers: n, ExtentSize: es}
	want := make([][]int64, n)
	for e := int64(0); e*es < size; e++ {
		s := l.ExtentServer("in", e)
		want[s] = append(want[s], e*es)
	}
	ctx := context.Background()
	for i, addr := range ctl {
		if _, err := control.NewClient(addr, nil, nil).Preload(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[i], recs[i].offs); diff != "" {
			t.Errorf("server %d read offsets (-want +got):\n%s", i, diff)
		}
	}
}

// TestDoomsOfEarlierReleases: a client of an earlier release dooms a file
// without naming its unlink, and ends the doom with an operation that is no
// longer served. The doom begins, and holds the data, since nobody can
// tell whether that unlink removed the file: the server's timeout ends it.
// An end without an unlink id is refused.
func TestDoomsOfEarlierReleases(t *testing.T) {
	backingDir := t.TempDir()
	data, _, engines := startOn(t, "tcp", backingDir, 1, func(_ int, c server.Cache) server.Cache { return c })
	ctx := context.Background()
	writeBackingFile(t, backingDir, "f", nil)
	if _, err := engines[0].WriteAt(ctx, "f", []byte("dirty"), 0); err != nil {
		t.Fatal(err)
	}
	c := wire.NewClient(data[0], wire.ClientOptions{})
	defer c.Close()
	call := func(op wire.Op, args *wire.Encoder) (wire.Reply, error) {
		return c.Do(ctx, &wire.Call{Op: op, Cred: ident.Process(), Args: args.Bytes()})
	}
	rep, err := call(wire.OpDoom, (&wire.Encoder{}).String("f"))
	if d := wire.NewDecoder(rep.Meta); err != nil || !d.Bool() {
		t.Fatalf("OpDoom without an unlink id: %v, want the file doomed", err)
	}
	if _, err := call(wire.OpDoom+1, (&wire.Encoder{}).String("f")); !errors.Is(err, syscall.ENOSYS) {
		t.Fatalf("the retired end of a doom: %v, want ENOSYS", err)
	}
	if _, err := call(wire.OpEndDoom, (&wire.Encoder{}).String("f").Uint64(0).Uint32(wire.UnlinkNotRemoved)); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("OpEndDoom without an unlink id: %v, want EINVAL", err)
	}
	if n := engines[0].Stats().DoomedFiles; n != 1 {
		t.Fatalf("%d doomed files, want the doom held for its timeout", n)
	}
}

// TestFlushAndDropKeepingSizes writes back a file whose size the engine
// knows from its record alone, as the metadata server of a file whose end
// another server holds: asked to keep sizes, the first of a client's two
// rounds, the server writes it back and keeps the size; asked again
// without, it forgets the file.
func TestFlushAndDropKeepingSizes(t *testing.T) {
	backingDir := t.TempDir()
	data, _, engines := startOn(t, "tcp", backingDir, 1, func(_ int, c server.Cache) server.Cache { return c })
	ctx := context.Background()
	writeBackingFile(t, backingDir, "f", nil)
	if _, err := engines[0].WriteAt(ctx, "f", []byte("dirty"), 0); err != nil {
		t.Fatal(err)
	}
	const size = 3 << 16
	if err := engines[0].ExtendSize(ctx, "f", size); err != nil {
		t.Fatal(err)
	}
	c := wire.NewClient(data[0], wire.ClientOptions{})
	defer c.Close()
	flushAndDrop := func(args *wire.Encoder) {
		t.Helper()
		if _, err := c.Do(ctx, &wire.Call{Op: wire.OpFlushAndDrop, Cred: ident.Process(), Args: args.Bytes()}); err != nil {
			t.Fatal(err)
		}
	}
	flushAndDrop((&wire.Encoder{}).String("f").Bool(true))
	if got, err := os.ReadFile(filepath.Join(backingDir, "f")); err != nil || string(got) != "dirty" {
		t.Errorf("backing file after a flush and drop keeping sizes: %q (%v), want the write", got, err)
	}
	if got, ok := engines[0].KnownSize("f", 0); !ok || got != size {
		t.Errorf("KnownSize after a flush and drop keeping sizes = %d, %v; want %d", got, ok, size)
	}
	flushAndDrop((&wire.Encoder{}).String("f"))
	if got, ok := engines[0].KnownSize("f", 0); ok {
		t.Errorf("KnownSize after a flush and drop = %d; want the file forgotten", got)
	}
}

// TestFlushAndDropKeepingData asks a server to write a file out, as a
// client does before it sets a time on it: the data must be in the
// backing file when the server answers, and the server must keep it.
func TestFlushAndDropKeepingData(t *testing.T) {
	backingDir := t.TempDir()
	data, _, engines := startOn(t, "tcp", backingDir, 1, func(_ int, c server.Cache) server.Cache { return c })
	ctx := context.Background()
	if _, err := engines[0].WriteAt(ctx, "f", []byte("dirty"), 0); err != nil {
		t.Fatal(err)
	}
	c := wire.NewClient(data[0], wire.ClientOptions{})
	defer c.Close()
	args := (&wire.Encoder{}).String("f").Bool(true).Bool(true)
	if _, err := c.Do(ctx, &wire.Call{Op: wire.OpFlushAndDrop, Cred: ident.Process(), Args: args.Bytes()}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(backingDir, "f")); err != nil || string(got) != "dirty" {
		t.Errorf("backing file after a write-out: %q (%v), want the write", got, err)
	}
	if got := engines[0].Stats().CachedBytes; got == 0 {
		t.Error("the server holds nothing of the file after a write-out; want it kept")
	}
}
