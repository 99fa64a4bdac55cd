package server_test

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// TestShutdownCancelsWritersWaitingForSpace fills a cache with dirty data
// that a failing backing store keeps from being written back, leaves a
// writer waiting for space, and checks that Shutdown ends soon after its
// deadline by cancelling the writer, with every dirty extent kept.
func TestShutdownCancelsWritersWaitingForSpace(t *testing.T) {
	const es, slots = 1 << 16, 64
	data, _, e, s := startServer(t, "tcp", t.TempDir(), 0, 1, same, func(st backing.Store) backing.Store {
		f := backing.NewFaulty(st)
		f.SetError(backing.OpWriteAt, syscall.EIO)
		return f
	})
	f, err := client.New(client.Options{Servers: []string{data}, ExtentSize: es})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	buf := bytes.Repeat([]byte("d"), es)
	wrote := make(chan error, 1)
	go func() {
		for i := range int64(slots + 4) {
			if _, err := f.WriteAt(ctx, "f", buf, i*es); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().DirtyExtents < slots {
		select {
		case err := <-wrote:
			t.Fatalf("the writer ended with %d dirty extents in a cache of %d: %v", e.Stats().DirtyExtents, slots, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dirty extents after 10s, want %d", e.Stats().DirtyExtents, slots)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-wrote:
		t.Fatalf("the writer did not wait for space: %v", err)
	case <-time.After(200 * time.Millisecond):
	}

	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(sctx) }()
	select {
	case err = <-shut:
	case <-time.After(10 * time.Second):
		_ = e.Close() // wakes the writer, so that the test can end
		t.Fatal("Shutdown with a deadline of 300ms still waits after 10s")
	}
	if !errors.Is(err, wire.ErrRequestsCancelled) {
		t.Errorf("Shutdown = %v, want %v", err, wire.ErrRequestsCancelled)
	}
	select {
	case err := <-wrote:
		if err == nil {
			t.Error("the write waiting for space succeeded on a server that shut down")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer still waits 10s after the shutdown")
	}
	if got := e.Stats().DirtyExtents; got != slots {
		t.Errorf("%d dirty extents after the shutdown, want %d: dirty data was dropped", got, slots)
	}
}
