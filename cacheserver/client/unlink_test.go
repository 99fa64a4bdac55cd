package client

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// engineServer starts a server with a real engine over backingDir, with
// its namespace wrapped by wrapNS if set, and returns its address and its
// cache.
func engineServer(t *testing.T, backingDir string, wrapNS func(namespace.FS) namespace.FS) (string, server.Cache) {
	t.Helper()
	var cache server.Cache
	addr, _ := startLocalServer(t, backingDir, localServer{servers: 1, wrapNS: wrapNS,
		wrap: func(c server.Cache) server.Cache { cache = c; return c }})
	return addr, cache
}

// mountOf returns a client of the server at addr, closed with the test,
// that waits wait after an unlink whose answer got lost.
func mountOf(t *testing.T, addr string, wait time.Duration) *FS {
	t.Helper()
	f, err := New(Options{Servers: []string{addr}, ExtentSize: localExtent, LostUnlinkWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestLostUnlinkAnswersSpareAFileCreatedAgain: the metadata server
// removed the file, but its answer got lost (it crashed, or the connection
// broke), and another mount created the file again before the unlink's
// doom ended. The doom is the removed file's: its data must not end up in
// the new file. Asking the metadata server whether the name is there, as
// the unlink once did, finds the new file, and would keep the old data and
// write it back into it. The doom holds meanwhile for a while, since the
// removal could still be under way.
func TestLostUnlinkAnswersSpareAFileCreatedAgain(t *testing.T) {
	ctx := context.Background()
	backingDir := t.TempDir()
	addr, cache := engineServer(t, backingDir, nil)
	const wait = 300 * time.Millisecond
	a, b := mountOf(t, addr, wait), mountOf(t, addr, wait)
	if _, err := a.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteAt(ctx, "f", bytes.Repeat([]byte("o"), 2*localExtent), 0); err != nil {
		t.Fatal(err)
	}
	u := unlink{path: "f", id: 1}
	if err := a.doom(ctx, &u); err != nil || len(u.servers) != 1 {
		t.Fatalf("doom = %v, %v; want the file doomed", u.servers, err)
	}
	// The metadata server removes the file; the answer does not come.
	if err := os.Remove(filepath.Join(backingDir, "f")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := b.WriteAt(ctx, "f", []byte("new"), 0)
		wrote <- err
	}()
	var stopped atomic.Bool
	start := time.Now()
	a.endUnlink(ctx, u, wire.ErrConnLost, func() { stopped.Store(true) })
	select {
	case err := <-wrote:
		t.Fatalf("the new file's write returned (%v) while the lost unlink may still be under way", err)
	case <-time.After(wait / 2):
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write to the new file: %v", err)
	}
	if waited := time.Since(start); waited < wait || !stopped.Load() {
		t.Fatalf("the doom ended after %v, held until then: %v; want it held for %v", waited, stopped.Load(), wait)
	}
	if err := b.Fsync(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if err := cache.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(backingDir, "f")); err != nil || string(got) != "new" {
		t.Fatalf("backing file: %d bytes (%.8q...), %v; want only the new file's %q", len(got), got, err, "new")
	}
}

// hookedUnlink is a namespace that runs a hook after each removal, before
// the server answers it.
type hookedUnlink struct {
	namespace.FS
	after func()
}

func (n hookedUnlink) Unlink(ctx context.Context, p string) error {
	err := n.FS.Unlink(ctx, p)
	if err == nil {
		n.after()
	}
	return err
}

// TestUnlinkSparesWritesOfAFileCreatedAgain: right after the metadata
// server removed a file that held no dirty data, and before it answered,
// another mount created the file again and wrote to it. The server forgets
// what it cached of the removed file, but not the new file's data: were it
// to drop all it held of the name, as it once did, the write would be lost.
func TestUnlinkSparesWritesOfAFileCreatedAgain(t *testing.T) {
	ctx := context.Background()
	backingDir := t.TempDir()
	var b *FS
	var hookErr error
	hook := func() {
		if _, err := b.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
			hookErr = err
			return
		}
		if _, err := b.WriteAt(ctx, "f", []byte("new"), 0); err != nil {
			hookErr = err
			return
		}
		hookErr = b.Fsync(ctx, "f")
	}
	addr, cache := engineServer(t, backingDir, func(ns namespace.FS) namespace.FS { return hookedUnlink{ns, hook} })
	a := mountOf(t, addr, 0)
	b = mountOf(t, addr, 0)
	if _, err := a.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Unlink(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if hookErr != nil {
		t.Fatalf("creating and writing the file again during the unlink: %v", hookErr)
	}
	if err := cache.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(backingDir, "f")); err != nil || string(got) != "new" {
		t.Fatalf("backing file: %q, %v; want the new file's %q", got, err, "new")
	}
}

// lostDoom is a cache whose dooms take effect but hold their answer until
// the test releases it.
type lostDoom struct {
	server.Cache
	doomed, release chan struct{}
}

func (c lostDoom) Doom(ctx context.Context, p string, unlink uint64) (bool, error) {
	kept, err := c.Cache.Doom(ctx, p, unlink)
	c.doomed <- struct{}{}
	<-c.release
	return kept, err
}

// TestDoomsWhoseAnswerGotLostEnd: a server doomed a file for an unlink,
// and the connection broke before its answer came. The unlink fails, and
// the file stays; so must its data, written back as before. The mount ends
// the doom it does not know began: otherwise the server would keep the
// file's data unwritten, and the writes to it waiting, for its doom
// timeout (two minutes).
func TestDoomsWhoseAnswerGotLostEnd(t *testing.T) {
	ctx := context.Background()
	backingDir := t.TempDir()
	var cache server.Cache
	lost := lostDoom{doomed: make(chan struct{}), release: make(chan struct{})}
	addr, _ := startLocalServer(t, backingDir, localServer{servers: 1,
		wrap: func(c server.Cache) server.Cache { cache = c; lost.Cache = c; return lost }})
	f := mountOf(t, addr, 0)
	if _, err := f.Create(ctx, "f", syscall.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("d"), 2*localExtent)
	if _, err := f.WriteAt(ctx, "f", data, 0); err != nil {
		t.Fatal(err)
	}
	unlinked := make(chan error, 1)
	go func() { unlinked <- f.Unlink(ctx, "f") }()
	<-lost.doomed
	f.servers[0].Close()
	close(lost.release)
	if err := <-unlinked; !errors.Is(err, wire.ErrConnLost) {
		t.Fatalf("Unlink whose doom's answer got lost: %v, want %v", err, wire.ErrConnLost)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cache.Flush(fctx); err != nil {
		t.Fatalf("flush after the failed unlink: %v (the doom still holds the data)", err)
	}
	if got, err := os.ReadFile(filepath.Join(backingDir, "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("backing file after the failed unlink: %d bytes, %v; want %d", len(got), err, len(data))
	}
}
