package client

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
)

// watchUntil has the client drop what its servers invalidate, and
// invalidates path on server 0 until the client was told of it: the
// watches begin in the background.
func watchUntil(t *testing.T, in *servertest.Instance, f *FS, path string) <-chan []string {
	t.Helper()
	dropped := make(chan []string, 100)
	f.Watch(func(paths []string) { dropped <- paths })
	for {
		ctl := control.NewClient(in.Control[0], []byte("k"), nil)
		if err := ctl.InvalidatePath(context.Background(), path); err != nil {
			t.Logf("invalidate: %v", err)
		}
		select {
		case p := <-dropped:
			if slices.Equal(p, []string{path}) {
				return dropped
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitDropAll waits until the client drops everything.
func waitDropAll(t *testing.T, dropped <-chan []string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case p := <-dropped:
			if slices.Equal(p, []string{""}) {
				return
			}
		case <-timeout:
			t.Fatal("the client did not drop everything")
		}
	}
}

// TestWatchDropsEverythingAfterAGap checks that a client drops everything
// its kernel caches when it may have missed invalidations: its server
// restarted, which forgot the paths it told, or the client's first watch
// failed, while the mount may have cached paths already.
func TestWatchDropsEverythingAfterAGap(t *testing.T) {
	t.Run("server restarted", func(t *testing.T) {
		in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: testExtent, Secret: "k"})
		f := connect(t, in)
		dropped := watchUntil(t, in, f, "warm")
		in.Restart(t, 0)
		waitDropAll(t, dropped)
	})
	t.Run("first watch failed", func(t *testing.T) {
		in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: testExtent, Secret: "k"})
		f := connect(t, in)
		in.Stop(t, 0)
		dropped := make(chan []string, 100)
		f.Watch(func(paths []string) { dropped <- paths })
		time.Sleep(2 * watchRetry)
		in.Restart(t, 0)
		waitDropAll(t, dropped)
	})
}
