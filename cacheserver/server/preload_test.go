package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/server"
)

// startSlowServer starts one server with a real engine whose backing-store
// reads take latency each, and returns its control client.
func startSlowServer(t *testing.T, backingDir string, latency time.Duration) *control.Client {
	t.Helper()
	_, ctl := startOver(t, backingDir, 1, func(_ int, c server.Cache) server.Cache { return c },
		func(s backing.Store) backing.Store {
			f := backing.NewFaulty(s)
			f.SetLatency(backing.OpReadAt, latency)
			f.SetLatency(backing.OpCopyRange, latency)
			return f
		})
	return control.NewClient(ctl[0], nil, nil)
}

// writeTree writes files of the given sizes under dir and returns their
// total size.
func writeTree(t *testing.T, dir string, sizes map[string]int) int64 {
	t.Helper()
	var total int64
	for name, size := range sizes {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		total += int64(size)
	}
	return total
}

// waitForPreloadProgress polls the server's stats until they show the
// preload under way, part done, with the total wanted; it fails if the
// preload ended first.
func waitForPreloadProgress(t *testing.T, c *control.Client, wantTotal int64, ended <-chan error) control.Stats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := c.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.PreloadBytesTotal == wantTotal && st.PreloadBytesDone > 0 && st.PreloadBytesDone < wantTotal {
			return st
		}
		select {
		case err := <-ended:
			t.Fatalf("preload ended (%v) before stats showed it part done; last stats %+v", err, st)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never showed the preload part done: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPreloadProgressInStats preloads a tree through a slow backing store
// and checks that the server's stats count the bytes done against the
// tree's total while it runs, and drop back to zero once it ended.
func TestPreloadProgressInStats(t *testing.T) {
	backingDir := t.TempDir()
	const es = 1 << 16
	total := writeTree(t, backingDir, map[string]int{"in/a": 4*es + 100, "in/sub/b": es, "in/sub/c": 10})
	c := startSlowServer(t, backingDir, 50*time.Millisecond)
	ended := make(chan error, 1)
	var res control.PreloadResult
	go func() {
		var err error
		res, err = c.Preload(context.Background(), "in")
		ended <- err
	}()

	waitForPreloadProgress(t, c, total, ended)
	if err := <-ended; err != nil || res.Bytes != total {
		t.Fatalf("Preload = %+v, %v; want the tree's %d bytes", res, err, total)
	}
	st, err := c.Stats(context.Background())
	if err != nil || st.PreloadBytesDone != 0 || st.PreloadBytesTotal != 0 {
		t.Errorf("stats after the preload: done %d, total %d (%v); want zero", st.PreloadBytesDone, st.PreloadBytesTotal, err)
	}
	if st.CopyUpBytes < total {
		t.Errorf("copied up %d bytes, want at least the tree's %d", st.CopyUpBytes, total)
	}
	// The tree's 7 extents each waited for the store's latency.
	if st.CopyUps < 7 || st.CopyUpSeconds < 7*0.05 {
		t.Errorf("stats say %d copy-ups took %gs; want at least 7 taking 50ms each", st.CopyUps, st.CopyUpSeconds)
	}
}

// TestPreloadCutShortLeavesNoProgress checks that a preload whose caller
// went away stops counting: a server's stats say nothing runs.
func TestPreloadCutShortLeavesNoProgress(t *testing.T) {
	backingDir := t.TempDir()
	const es = 1 << 16
	total := writeTree(t, backingDir, map[string]int{"big": 20 * es})
	c := startSlowServer(t, backingDir, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := c.Preload(ctx, "big")
		ended <- err
	}()

	waitForPreloadProgress(t, c, total, ended)
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("Preload after cancel: %v, want context.Canceled", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.PreloadBytesDone == 0 && st.PreloadBytesTotal == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats still show a preload after it was cut short: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
