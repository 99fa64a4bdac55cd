package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
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
	if doomed, err := r.doom("f"); err != nil || !doomed {
		t.Fatalf("Doom = %v, %v; want the dirty file doomed", doomed, err)
	}
	return r
}

// unlinkIDs numbers the unlinks of the tests.
var unlinkIDs atomic.Uint64

// doom dooms p, as an unlink with an id of its own does, and keeps the id
// for endDoom.
func (r *rig) doom(p string) (bool, error) {
	id := unlinkIDs.Add(1)
	doomed, err := r.e.Doom(context.Background(), p, id)
	if r.dooms == nil {
		r.dooms = map[string]uint64{}
	}
	r.dooms[p] = id
	return doomed, err
}

// endDoom ends the doom that doom began on p, as an unlink that ended how.
func (r *rig) endDoom(ctx context.Context, p string, how Unlinked) error {
	return r.e.EndDoom(ctx, p, r.dooms[p], how)
}

// ender returns endDoom with how, for whileDoomed.
func (r *rig) ender(how Unlinked) func(context.Context, string) error {
	return func(ctx context.Context, p string) error { return r.endDoom(ctx, p, how) }
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
	if err := r.endDoom(context.Background(), "f", NotRemoved); err != nil {
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
	if err := r.endDoom(context.Background(), "f", Removed); err != nil {
		t.Fatal(err)
	}
	if err := r.flushFor(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("f"); got != nil {
		t.Fatalf("backing file after the unlink: %q, want none", got)
	}
}

// whileDoomed starts fn, checks that it waits while doomRig's file is
// doomed, ends the doom with end, and returns fn's error.
func (r *rig) whileDoomed(fn func(context.Context) error, end func(context.Context, string) error) error {
	r.t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn(context.Background()) }()
	select {
	case err := <-done:
		r.t.Fatalf("a change of a doomed file returned (%v) before the doom ended", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := end(context.Background(), "f"); err != nil {
		r.t.Fatal(err)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		r.t.Fatal("a change of a doomed file still waits after the doom ended")
		return nil
	}
}

// TestChangesWaitForTheUnlink: between the removal of the backing file and
// the Drop that ends an unlink, another client may create the file again
// and write to it. Those writes, and the size it publishes, wait for the
// doom to end and go to the new file; were they taken into the doomed one,
// the Drop would lose them. After a failed unlink they go to the old file.
func TestChangesWaitForTheUnlink(t *testing.T) {
	ctx := context.Background()
	t.Run("a new file", func(t *testing.T) {
		r := doomRig(t, nil)
		r.removeBacking("f")
		r.writeBacking("f", nil)
		err := r.whileDoomed(func(ctx context.Context) error {
			_, err := r.e.WriteAt(ctx, "f", []byte("second"), 0)
			return err
		}, r.ender(Removed))
		if err != nil {
			t.Fatalf("write to the new file: %v", err)
		}
		if err := r.flushFor(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if got := r.backingFile("f"); string(got) != "second" {
			t.Fatalf("backing file: %q, want what was written after the unlink", got)
		}
	})
	t.Run("a new file's size", func(t *testing.T) {
		r := doomRig(t, nil)
		r.removeBacking("f")
		r.writeBacking("f", nil)
		err := r.whileDoomed(func(ctx context.Context) error { return r.e.ExtendSize(ctx, "f", 4096) }, r.ender(Removed))
		if err != nil {
			t.Fatal(err)
		}
		if size, ok := r.e.KnownSize("f", 0); !ok || size != 4096 {
			t.Fatalf("KnownSize = %d, %v; want the size published after the unlink", size, ok)
		}
	})
	t.Run("a failed unlink", func(t *testing.T) {
		r := doomRig(t, nil)
		err := r.whileDoomed(func(ctx context.Context) error {
			_, err := r.e.WriteAt(ctx, "f", []byte("NEW"), 0)
			return err
		}, r.ender(NotRemoved))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.flushFor(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if got := r.backingFile("f"); string(got) != "NEW data" {
			t.Fatalf("backing file: %q, want both writes", got)
		}
	})
	t.Run("a caller that gives up", func(t *testing.T) {
		r := doomRig(t, nil)
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := r.e.WriteAt(wctx, "f", []byte("late"), 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("write to a doomed file past its deadline: %v", err)
		}
		if err := r.endDoom(ctx, "f", NotRemoved); err != nil {
			t.Fatal(err)
		}
		if err := r.flushFor(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if got := r.backingFile("f"); string(got) != "new data" {
			t.Fatalf("backing file: %q, want the write that gave up left out", got)
		}
	})
}

// TestCleanFilesAreDroppedNotDoomed: a file with nothing the backing store
// lacks has nothing to keep: Doom drops it.
func TestCleanFilesAreDroppedNotDoomed(t *testing.T) {
	r := newRig(t, modelES, 6, nil)
	r.writeBacking("c", []byte("clean"))
	r.readAll("c")
	doomed, err := r.doom("c")
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
// back (the unlink may remove the file, and write-back would bring it back)
// nor lose it when the unlink did not happen: the doom holds until it
// times out. A file that the unlink removed already is dropped at once.
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
			if gone {
				if n := r.e.Stats().DoomedFiles; n != 0 {
					t.Fatalf("%d doomed files after the restart, want the removed one dropped", n)
				}
			} else if err := r.flushFor(100 * time.Millisecond); !errors.Is(err, ErrDirtyLeft) {
				t.Fatalf("flush right after the restart: %v, want %v while the doom holds", err, ErrDirtyLeft)
			}
			r.awaitDoomEnd(gone)
		})
	}
}

// doomedTwice is doomRig's file doomed by a second unlink too, on a file
// system that can crash, with doom timeouts an hour away. It returns the
// ids of both unlinks.
func doomedTwice(t *testing.T, seed uint64) (r *rig, fsys *vfs.Crashable, first, second uint64) {
	t.Helper()
	fsys = vfs.NewCrashable(vfs.OS{}, seed)
	r = doomRig(t, func(c *Config) {
		crashable(t, c, fsys)
		c.DoomTimeout = time.Hour
	})
	first = r.dooms["f"]
	if doomed, err := r.doom("f"); err != nil || !doomed {
		t.Fatalf("second Doom = %v, %v; want the file doomed", doomed, err)
	}
	return r, fsys, first, r.dooms["f"]
}

// TestDoomCountsSurviveACrash: two unlinks of one file are under way (two
// mounts, say) when the cache crashes. After the restart, the one that
// failed ends its doom; the other still holds the file doomed, so nothing
// is written back before its removal. Had the restart counted one doom,
// write-back would run at once, and the removed file would come back.
func TestDoomCountsSurviveACrash(t *testing.T) {
	r, fsys, failed, removes := doomedTwice(t, 23)
	ctx := context.Background()
	r.crash(fsys)
	if err := r.e.EndDoom(ctx, "f", failed, NotRemoved); err != nil {
		t.Fatal(err)
	}
	if err := r.flushFor(200 * time.Millisecond); !errors.Is(err, ErrDirtyLeft) {
		t.Fatalf("flush while the other unlink holds the doom: %v, want %v", err, ErrDirtyLeft)
	}
	if got := r.backingFile("f"); string(got) != "old" {
		t.Fatalf("backing file while the other unlink holds the doom: %q, want it untouched", got)
	}
	r.removeBacking("f")
	if err := r.e.EndDoom(ctx, "f", removes, Removed); err != nil {
		t.Fatal(err)
	}
	if err := r.flushFor(10 * time.Second); err != nil {
		t.Fatalf("flush after the unlink: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.root, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unlinked file is back: %v", err)
	}
}

// TestEndedDoomsStayEndedAfterACrash: of two unlinks under way, one
// fails and ends its doom before the cache crashes. The restarted engine
// must count one doom, not two: the other unlink's end must let write-back
// go on at once rather than after DoomTimeout.
func TestEndedDoomsStayEndedAfterACrash(t *testing.T) {
	r, fsys, first, second := doomedTwice(t, 29)
	ctx := context.Background()
	if err := r.e.EndDoom(ctx, "f", first, NotRemoved); err != nil {
		t.Fatal(err)
	}
	r.crash(fsys)
	if err := r.e.EndDoom(ctx, "f", second, NotRemoved); err != nil {
		t.Fatal(err)
	}
	if err := r.flushFor(10 * time.Second); err != nil {
		t.Fatalf("flush after both unlinks ended: %v", err)
	}
	if got := r.backingFile("f"); string(got) != "new data" {
		t.Fatalf("backing file after both unlinks failed: %q, want the data written back", got)
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

// TestRestartDropsFilesTheirUnlinksRemoved: the cache crashes after an
// unlink removed the backing file, before the commit of its Drop (which
// Drop does not wait for) or before the Drop. The restart must drop the
// file at once: were the doom to time out instead, it would find a file
// that a job created at the path meanwhile, keep the old data, and write
// it back into the new file.
func TestRestartDropsFilesTheirUnlinksRemoved(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 31)
	r := doomRig(t, func(c *Config) {
		crashable(t, c, fsys)
		c.DoomTimeout = 100 * time.Millisecond
	})
	r.removeBacking("f")
	r.crash(fsys)
	r.writeBacking("f", []byte("fresh"))
	if got := r.readAll("f"); string(got) != "fresh" {
		t.Fatalf("the new file reads %q after the restart, want %q", got, "fresh")
	}
	// The engine's ticker ends dooms older than DoomTimeout meanwhile.
	time.Sleep(300 * time.Millisecond)
	if err := r.flushFor(10 * time.Second); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if got := r.backingFile("f"); string(got) != "fresh" {
		t.Fatalf("backing file after the doom's timeout: %q, want the new file, %q", got, "fresh")
	}
}

// replaceBacking puts a new file with data at the backing path p, as a job
// that creates the file again after an unlink removed it does: it has
// another inode than the one the unlink removed.
func (r *rig) replaceBacking(p string, data []byte) {
	r.t.Helper()
	r.writeBacking(p+".new", data)
	if err := os.Rename(filepath.Join(r.root, p+".new"), filepath.Join(r.root, p)); err != nil {
		r.t.Fatal(err)
	}
}

// TestDoomsOfAFileCreatedAgainEndAsGone: an unlink removed the backing
// file, its end never reached the cache (the caller died, or the cache
// crashed first), and a job created the file again under the same name
// before the doom was resolved. The doom is about the removed file: its
// data must be dropped, not written back into the new one. A file created
// right after the removal often gets its inode number (ext4 does that).
func TestDoomsOfAFileCreatedAgainEndAsGone(t *testing.T) {
	for _, restart := range []bool{false, true} {
		for _, renamed := range []bool{false, true} {
			name := map[bool]string{false: "timed out", true: "restarted"}[restart] + "/" +
				map[bool]string{false: "removed then created", true: "renamed over"}[renamed]
			t.Run(name, func(t *testing.T) {
				fsys := vfs.NewCrashable(vfs.OS{}, 37)
				r := doomRig(t, func(c *Config) {
					crashable(t, c, fsys)
					c.DoomTimeout = 100 * time.Millisecond
				})
				if renamed {
					r.replaceBacking("f", []byte("fresh"))
				} else {
					r.removeBacking("f")
					r.writeBacking("f", []byte("fresh"))
				}
				if restart {
					r.cfg.DoomTimeout = time.Hour
					r.crash(fsys)
					if n := r.e.Stats().DoomedFiles; n != 0 {
						t.Fatalf("%d doomed files after the restart, want the replaced one dropped", n)
					}
				} else {
					// The engine's ticker ends dooms older than DoomTimeout.
					time.Sleep(300 * time.Millisecond)
				}
				if err := r.flushFor(10 * time.Second); err != nil {
					t.Fatalf("flush: %v", err)
				}
				if got := r.backingFile("f"); string(got) != "fresh" {
					t.Fatalf("backing file: %q, want the new file, %q", got, "fresh")
				}
			})
		}
	}
}

// TestUnlinksThatCannotTellAskTheBackingStore: an unlink whose removal's
// answer got lost ends its doom as MaybeRemoved, and the backing store
// decides at once, as a timeout would, by the identity of the doomed file:
// a file that a job created again under the name meanwhile gets none of
// the old data. A backing store that does not answer keeps the doom.
func TestUnlinksThatCannotTellAskTheBackingStore(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		change func(r *rig)
		want   string
	}{
		"still there":             {change: func(*rig) {}, want: "new data"},
		"removed":                 {change: func(r *rig) { r.removeBacking("f") }},
		"removed then created":    {change: func(r *rig) { r.removeBacking("f"); r.writeBacking("f", []byte("fresh")) }, want: "fresh"},
		"renamed over by another": {change: func(r *rig) { r.replaceBacking("f", []byte("fresh")) }, want: "fresh"},
	} {
		t.Run(name, func(t *testing.T) {
			r := doomRig(t, func(c *Config) { c.DoomTimeout = time.Hour })
			tc.change(r)
			if err := r.endDoom(ctx, "f", MaybeRemoved); err != nil {
				t.Fatal(err)
			}
			if n := r.e.Stats().DoomedFiles; n != 0 {
				t.Fatalf("%d doomed files after the end of the doom, want 0", n)
			}
			if err := r.flushFor(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if got := r.backingFile("f"); string(got) != tc.want {
				t.Fatalf("backing file: %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("backing store failing", func(t *testing.T) {
		r := doomRig(t, func(c *Config) { c.DoomTimeout = time.Hour })
		r.faulty.SetError(backing.OpStat, syscall.EIO)
		if err := r.endDoom(ctx, "f", MaybeRemoved); !errors.Is(err, syscall.EIO) {
			t.Fatalf("EndDoom with the backing store failing: %v, want EIO", err)
		}
		if n := r.e.Stats().DoomedFiles; n != 1 {
			t.Fatalf("%d doomed files, want the doom kept while nothing can tell", n)
		}
		r.faulty.SetError(backing.OpStat, nil)
		if err := r.endDoom(ctx, "f", MaybeRemoved); err != nil {
			t.Fatal(err)
		}
		r.awaitDoomEnd(false)
	})
}

// TestEndDoomEndsItsOwnDoomOnly: two unlinks of one file are under way.
// The first to end drops the file; a job creates it again and writes; the
// other unlink's end, late, must leave the new file's data alone, and so
// must the late end of an unlink whose doom another unlink of the new file
// holds meanwhile.
func TestEndDoomEndsItsOwnDoomOnly(t *testing.T) {
	ctx := context.Background()
	for name, how := range map[string]Unlinked{"removed": Removed, "not removed": NotRemoved, "cannot tell": MaybeRemoved} {
		t.Run(name, func(t *testing.T) {
			r := doomRig(t, func(c *Config) { c.DoomTimeout = time.Hour })
			late := r.dooms["f"]
			if doomed, err := r.doom("f"); err != nil || !doomed {
				t.Fatalf("second Doom = %v, %v", doomed, err)
			}
			r.removeBacking("f")
			if err := r.endDoom(ctx, "f", Removed); err != nil {
				t.Fatal(err)
			}
			r.writeBacking("f", nil)
			r.write("f", 0, []byte("second"))
			if err := r.e.EndDoom(ctx, "f", late, how); err != nil {
				t.Fatal(err)
			}
			if err := r.flushFor(10 * time.Second); err != nil {
				t.Fatal(err)
			}
			if got := r.backingFile("f"); string(got) != "second" {
				t.Fatalf("backing file: %q, want the new file's data", got)
			}
			// The new file is being unlinked in turn: the late end of the
			// old unlink must not end that doom.
			r.write("f", 0, []byte("SECOND"))
			if doomed, err := r.doom("f"); err != nil || !doomed {
				t.Fatalf("Doom of the new file = %v, %v", doomed, err)
			}
			if err := r.e.EndDoom(ctx, "f", late, how); err != nil {
				t.Fatal(err)
			}
			if n := r.e.Stats().DoomedFiles; n != 1 {
				t.Fatalf("%d doomed files after the late end of another doom, want the new file's doom kept", n)
			}
			if got := r.backingFile("f"); string(got) != "second" {
				t.Fatalf("backing file while the new file is doomed: %q, want it untouched", got)
			}
		})
	}
}

// TestEndThatOvertakesItsDoom: a caller whose Doom got no answer (its
// connection broke while the Doom waited for write-back of the file) fails
// the unlink and ends the doom with NotRemoved, and that end can come
// before the Doom. The Doom then begins nothing: the unlink is over. Were
// it to begin a doom, the file's writes, flushes and renames would wait
// DoomTimeout for an unlink that failed.
func TestEndThatOvertakesItsDoom(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: time.Unix(1_000_000, 0)}
	r := newRig(t, modelES, 6, func(c *Config) {
		c.Clock = clk
		c.DoomTimeout = time.Hour
	})
	r.write("f", 0, []byte("written"))
	late := unlinkIDs.Add(1)
	if err := r.e.EndDoom(ctx, "f", late, NotRemoved); err != nil {
		t.Fatal(err)
	}
	if doomed, err := r.e.Doom(ctx, "f", late); err != nil || doomed {
		t.Fatalf("Doom after its end = %v, %v; want nothing begun", doomed, err)
	}
	if n := r.e.Stats().DoomedFiles; n != 0 {
		t.Fatalf("%d doomed files after a Doom that its end overtook, want 0", n)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.e.WriteAt(wctx, "f", []byte("WRITTEN"), 0); err != nil {
		t.Fatalf("write after an overtaken Doom: %v; want it not held", err)
	}
	if err := r.flushFor(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("f"); string(got) != "WRITTEN" {
		t.Fatalf("backing file: %q, want the data kept and written back", got)
	}

	// The other ends say the removal went on, and only ever follow the
	// answer of their Doom: a Doom that comes after one begins as before.
	r.write("f", 0, []byte("again"))
	removed := unlinkIDs.Add(1)
	if err := r.e.EndDoom(ctx, "f", removed, Removed); err != nil {
		t.Fatal(err)
	}
	if doomed, err := r.e.Doom(ctx, "f", removed); err != nil || !doomed {
		t.Fatalf("Doom after a Removed end that found none = %v, %v; want the file doomed", doomed, err)
	}

	// An end is remembered for DoomTimeout only.
	forgotten := unlinkIDs.Add(1)
	if err := r.e.EndDoom(ctx, "f", forgotten, NotRemoved); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r.e.mu.Lock()
		n := len(r.e.overtaken)
		r.e.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d overtaken ends remembered past DoomTimeout, want 0", n)
		}
	}
}

// TestUnlinksEndTheirDoomsOnce: a caller that did not get the answer of
// its Doom or EndDoom (its server crashed, the connection broke) sends the
// end again, or an end for a doom that may never have begun. Each unlink's
// doom ends once, across a restart too: another unlink of the file still
// holds it, and a Doom sent twice holds it once.
func TestUnlinksEndTheirDoomsOnce(t *testing.T) {
	ctx := context.Background()
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "end sent again", true: "end sent again across a restart"}[crash], func(t *testing.T) {
			r, fsys, first, second := doomedTwice(t, 41)
			if err := r.e.EndDoom(ctx, "f", first, NotRemoved); err != nil {
				t.Fatal(err)
			}
			if crash {
				r.crash(fsys)
			}
			for _, id := range []uint64{first, unlinkIDs.Add(1)} {
				if err := r.e.EndDoom(ctx, "f", id, NotRemoved); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.flushFor(200 * time.Millisecond); !errors.Is(err, ErrDirtyLeft) {
				t.Fatalf("flush while the other unlink holds the doom: %v, want %v", err, ErrDirtyLeft)
			}
			if err := r.e.EndDoom(ctx, "f", second, NotRemoved); err != nil {
				t.Fatal(err)
			}
			r.awaitDoomEnd(false)
		})
	}
	t.Run("doom sent twice", func(t *testing.T) {
		r := doomRig(t, func(c *Config) { c.DoomTimeout = time.Hour })
		id := r.dooms["f"]
		if doomed, err := r.e.Doom(ctx, "f", id); err != nil || !doomed {
			t.Fatalf("Doom again = %v, %v", doomed, err)
		}
		if err := r.e.EndDoom(ctx, "f", id, NotRemoved); err != nil {
			t.Fatal(err)
		}
		r.awaitDoomEnd(false)
	})
}
