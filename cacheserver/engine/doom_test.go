package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// doomRig writes dirty, synced data over an existing backing file "f" and
// dooms it, as an unlink does before it removes the backing file.
func doomRig(t *testing.T, mod func(*Config)) *rig {
	t.Helper()
	r := newRig(t, modelES, 6, mod)
	ctx := context.Background()
	r.writeBacking("f", []byte("old"))
	r.write("f", 0, []byte("new data"))
	if err := r.e.Sync(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if doomed, err := r.e.Doom(ctx, "f"); err != nil || !doomed {
		t.Fatalf("Doom = %v, %v; want the dirty file doomed", doomed, err)
	}
	return r
}

// flushFor flushes for at most d and returns the error.
func (r *rig) flushFor(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return r.e.Flush(ctx)
}

// removeBacking removes the backing file p, as an unlink does.
func (r *rig) removeBacking(p string) {
	r.t.Helper()
	if err := os.Remove(filepath.Join(r.root, p)); err != nil {
		r.t.Fatal(err)
	}
}

// awaitDoomEnd flushes until the doom of doomRig's file timed out, and
// checks that it ended as the backing store said: the data dropped when
// the file is gone, written back when it is not.
func (r *rig) awaitDoomEnd(gone bool) {
	r.t.Helper()
	if err := r.flushFor(10 * time.Second); err != nil {
		r.t.Fatalf("flush after the doom timed out: %v", err)
	}
	got, want := r.backingFile("f"), "new data"
	if gone {
		want = ""
	}
	if string(got) != want {
		r.t.Fatalf("backing file: %q, want %q", got, want)
	}
}

// TestDoomedDataWaitsForTheUnlink: while an unlink holds a file doomed, its
// dirty data is not written back and a flush waits; a failed unlink ends
// the doom and the data reaches the backing file.
func TestDoomedDataWaitsForTheUnlink(t *testing.T) {
	r := doomRig(t, nil)
	if err := r.flushFor(100 * time.Millisecond); !errors.Is(err, ErrDirtyLeft) {
		t.Fatalf("flush of a doomed file: %v, want %v", err, ErrDirtyLeft)
	}
	if n := r.e.Stats().DoomedFiles; n != 1 {
		t.Fatalf("Stats().DoomedFiles = %d, want 1", n)
	}
	if got := r.backingFile("f"); string(got) != "old" {
		t.Fatalf("backing file of a doomed file: %q, want it untouched", got)
	}
	if got := r.readAll("f"); string(got) != "new data" {
		t.Fatalf("read of a doomed file: %q", got)
	}
	if err := r.e.Undoom(context.Background(), "f"); err != nil {
		t.Fatal(err)
	}
	if err := r.flushFor(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("f"); string(got) != "new data" {
		t.Fatalf("backing file after a failed unlink: %q, want the data written", got)
	}
	if n := r.e.Stats().DoomedFiles; n != 0 {
		t.Fatalf("Stats().DoomedFiles = %d after the doom ended, want 0", n)
	}
}

// TestDoomedThenDroppedStaysGone: the unlink succeeded, and Drop ends the
// doom without writing anything back.
func TestDoomedThenDroppedStaysGone(t *testing.T) {
	r := doomRig(t, nil)
	r.removeBacking("f")
	if err := r.e.Drop(context.Background(), "f"); err != nil {
		t.Fatal(err)
	}
	if err := r.flushFor(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("f"); got != nil {
		t.Fatalf("backing file after the unlink: %q, want none", got)
	}
}

// TestCleanFilesAreDroppedNotDoomed: a file with nothing the backing store
// lacks has nothing to keep: Doom drops it.
func TestCleanFilesAreDroppedNotDoomed(t *testing.T) {
	r := newRig(t, modelES, 6, nil)
	r.writeBacking("c", []byte("clean"))
	r.readAll("c")
	doomed, err := r.e.Doom(context.Background(), "c")
	if err != nil || doomed {
		t.Fatalf("Doom of a clean file = %v, %v; want it dropped", doomed, err)
	}
	if n := r.trackedFiles(); n != 0 {
		t.Fatalf("%d files tracked after Doom of the only, clean one", n)
	}
}

// TestDoomsNobodyEndsEndAfterTheTimeout: the caller died during the
// unlink. The backing store decides: data of a file gone there is dropped,
// data of a file still there is written back.
func TestDoomsNobodyEndsEndAfterTheTimeout(t *testing.T) {
	for name, gone := range map[string]bool{"unlinked": true, "not unlinked": false} {
		t.Run(name, func(t *testing.T) {
			r := doomRig(t, func(c *Config) { c.DoomTimeout = 100 * time.Millisecond })
			if gone {
				r.removeBacking("f")
			}
			r.awaitDoomEnd(gone)
		})
	}
}

// TestDoomsSurviveACrash crashes right after a Doom, with the periodic
// commit an hour away. The restarted engine must neither write the data
// back before the doom times out (the unlink may have removed the file, and
// write-back would bring it back) nor lose it when the unlink did not
// happen.
func TestDoomsSurviveACrash(t *testing.T) {
	for name, gone := range map[string]bool{"unlinked": true, "not unlinked": false} {
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewCrashable(vfs.OS{}, 17)
			r := doomRig(t, func(c *Config) {
				crashable(t, c, fsys)
			})
			if gone {
				r.removeBacking("f")
			}
			r.cfg.DoomTimeout = 300 * time.Millisecond
			r.crash(fsys)
			if err := r.flushFor(100 * time.Millisecond); !errors.Is(err, ErrDirtyLeft) {
				t.Fatalf("flush right after the restart: %v, want %v while the doom holds", err, ErrDirtyLeft)
			}
			r.awaitDoomEnd(gone)
		})
	}
}

// TestHeldDoomsOutlastTheTimeout: an unlink slower than DoomTimeout holds
// its doom. Were the doom to time out, it would find the file still there
// and write it back, and the removal, when it ends, would leave a file
// that write-back brings back.
func TestHeldDoomsOutlastTheTimeout(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_000_000, 0)}
	r := doomRig(t, func(c *Config) {
		c.Clock = clk
		c.DoomTimeout = time.Minute
	})
	ctx := context.Background()
	clk.advance(50 * time.Second)
	if err := r.e.HoldDoom(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	clk.advance(50 * time.Second)
	// Ticks of the engine's timer pass meanwhile: a doom that was not held
	// times out in them.
	time.Sleep(100 * time.Millisecond)
	if err := r.flushFor(200 * time.Millisecond); !errors.Is(err, ErrDirtyLeft) {
		t.Fatalf("flush while the unlink holds the doom: %v, want %v", err, ErrDirtyLeft)
	}
	if got := r.backingFile("f"); string(got) != "old" {
		t.Fatalf("backing file while the unlink holds the doom: %q, want it untouched", got)
	}
	r.removeBacking("f")
	clk.advance(time.Minute)
	r.awaitDoomEnd(true)
}
