package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/placement"
	"github.com/burstcache/burstcache/cacheserver/posixns"
	"github.com/burstcache/burstcache/cacheserver/server"
)

// startEngineServers starts n servers with real engines over one backing
// directory and returns their data and control addresses.
func startEngineServers(t testing.TB, backingDir string, n int) (data, ctl []string) {
	t.Helper()
	for i := range n {
		dir, err := server.ClaimCacheDir(filepath.Join(t.TempDir(), "cache"), server.Identity{Instance: "t", Index: i, Servers: n, ExtentSize: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		tun := engine.Tunables{}
		e, err := engine.Open(engine.Config{Dir: dir, Backing: backing.NewDir(backingDir), ExtentSize: 1 << 16, Capacity: 64 << 16, Tunables: tun, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ns, err := posixns.New(backingDir)
		if err != nil {
			t.Fatal(err)
		}
		s := server.New(server.Config{Cache: server.EngineCache(e, tun), NS: ns, Cred: ident.Process(),
			Info: control.ServerInfo{Instance: "t", Index: i, Servers: n, ExtentSize: 1 << 16}, Log: slog.New(slog.DiscardHandler)})
		dl, _ := net.Listen("tcp", "127.0.0.1:0")
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
		data, ctl = append(data, dl.Addr().String()), append(ctl, cl.Addr().String())
	}
	return data, ctl
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
		c := control.NewClient(addr, nil)
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

// TestPreloadCopiesUpOnlyOwnExtents preloads a file through every server's
// control API and checks that each server copied up the extents placement
// gives it, and not the whole file: the engine may prefetch one extent
// ahead, no more.
func TestPreloadCopiesUpOnlyOwnExtents(t *testing.T) {
	backingDir := t.TempDir()
	const n, es, size = 3, 1 << 16, 10<<16 + 5
	if err := os.WriteFile(filepath.Join(backingDir, "in"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ctl := startEngineServers(t, backingDir, n)
	l := placement.Layout{Servers: n, ExtentSize: es}
	own := make([]int64, n)
	for e := int64(0); e*es < size; e++ {
		own[l.ExtentServer("in", e)] += min(es, size-e*es)
	}
	ctx := context.Background()
	for i, addr := range ctl {
		c := control.NewClient(addr, nil)
		if err := c.Preload(ctx, ""); err != nil {
			t.Fatal(err)
		}
		st, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.CopyUpBytes < own[i] || st.CopyUpBytes > own[i]+es {
			t.Errorf("server %d copied up %d bytes; it holds %d of the file", i, st.CopyUpBytes, own[i])
		}
	}
}
