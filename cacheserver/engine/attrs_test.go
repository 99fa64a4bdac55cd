package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// newAttrRig is newNameRig with file fsyncs recorded too.
func newAttrRig(t *testing.T, durability Durability) (*rig, *nameLog) {
	r, log := newNameRig(t, durability)
	log.files = true
	return r, log
}

// wantEvents fails the test unless events hold each of want.
func wantEvents(t *testing.T, events []string, what string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(events, w) {
			t.Errorf("%s: events %q, want %q among them", what, events, w)
		}
	}
}

// changeAttrs changes, on the backing store of r, the attributes of a
// regular file (its size, mode and times), a directory, a symbolic link
// and a FIFO, as a metadata server's setattr does, and returns their
// paths.
func changeAttrs(t *testing.T, r *rig) []string {
	t.Helper()
	r.writeBacking("d/f", []byte("old bytes past the new end"))
	root := r.root
	if err := os.MkdirAll(filepath.Join(root, "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.Mkdir(filepath.Join(root, "d/sub"), 0o755),
		os.Symlink("f", filepath.Join(root, "d/s")),
		syscall.Mkfifo(filepath.Join(root, "e/p"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(root, "d/f")
	for _, err := range []error{
		os.Truncate(f, 3),
		os.Chmod(f, 0o600),
		os.Chtimes(f, time.Unix(1, 0), time.Unix(2, 0)),
		os.Chmod(filepath.Join(root, "d/sub"), 0o700),
		os.Chmod(filepath.Join(root, "e/p"), 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return []string{"d/f", "d/sub", "d/s", "e/p"}
}

// TestAttrsChangedAreDurable changes attributes of backing files as a
// mount's truncate, chmod and utimes do, on the backing store at the
// call, and tells the engine: the file must be fsynced (a directory as a
// directory; a symbolic link or a FIFO, which cannot be opened to fsync
// without harm, through its directory) before a flush (of everything, or
// of a path) returns, or with Durability Backing before AttrsChanged
// returns, or a crash of the backing store's node after it could bring
// back the old size, and the bytes past the new end, or the old mode. A
// second flush has nothing left to fsync.
func TestAttrsChangedAreDurable(t *testing.T) {
	for _, durability := range []Durability{Cache, Backing} {
		t.Run(string(durability), func(t *testing.T) {
			r, log := newAttrRig(t, durability)
			ctx := context.Background()
			paths := changeAttrs(t, r)
			log.take()
			if err := r.e.AttrsChanged(ctx, paths...); err != nil {
				t.Fatal(err)
			}
			if durability == Cache {
				if events := log.take(); len(events) != 0 {
					t.Errorf("AttrsChanged with Durability Cache: %q, want nothing fsynced before a flush", events)
				}
				if err := r.e.FlushPath(ctx, "d/f"); err != nil {
					t.Fatal(err)
				}
			}
			wantEvents(t, log.take(), "attributes changed through the cache",
				"fsync file d/f", "fsync directory d/sub", "fsync directory d", "fsync directory e")
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if events := log.take(); len(events) != 0 {
				t.Errorf("second flush: %q, want nothing fsynced", events)
			}
		})
	}
}

// TestTruncateIsDurable truncates a file whose data the cache wrote back
// already: nothing is left to write back, so no write-back fsyncs the
// backing file, and the flush after the truncate, or with Durability
// Backing the truncate itself, must.
func TestTruncateIsDurable(t *testing.T) {
	for _, durability := range []Durability{Cache, Backing} {
		t.Run(string(durability), func(t *testing.T) {
			r, log := newAttrRig(t, durability)
			ctx := context.Background()
			r.write("t/f", 0, []byte("bytes the truncate cuts off"))
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			log.take()
			if err := r.e.Truncate(ctx, "t/f", 5); err != nil {
				t.Fatal(err)
			}
			if durability == Cache {
				if err := r.e.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			wantEvents(t, log.take(), "truncate", "fsync file t/f")
		})
	}
}

// TestAttrsOfRemovedFile tells the engine of a file whose attributes
// changed and that was removed since, or whose directory was: it has no
// inode left to make durable, and the flush must succeed, not fail for
// ever.
func TestAttrsOfRemovedFile(t *testing.T) {
	r, log := newAttrRig(t, Cache)
	ctx := context.Background()
	r.writeBacking("g/f", nil)
	if err := r.e.AttrsChanged(ctx, "g/f", "h/f"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(r.root, "g")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.root, "h"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush after the files were removed: %v", err)
	}
	if events := log.take(); len(events) != 0 {
		t.Errorf("flush: %q, want nothing fsynced", events)
	}
}

// TestFailedAttrFsyncIsRetried fails the fsync of a file whose attributes
// changed: every flush says so until the fsync works, and Close makes it
// durable.
func TestFailedAttrFsyncIsRetried(t *testing.T) {
	r, log := newAttrRig(t, Cache)
	ctx := context.Background()
	r.writeBacking("f", []byte("x"))
	if err := r.e.AttrsChanged(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	r.faulty.SetError(backing.OpSync, errInjected)
	if err := r.e.Flush(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("Flush while fsync fails = %v, want its error", err)
	}
	r.faulty.SetError(backing.OpSync, nil)
	r.restart()
	wantEvents(t, log.take(), "close once fsync works", "fsync file f")
}

// TestChangesSurviveACrash has names and attributes changed through the
// cache, and committed (a job's fsync reaches every server), but not
// fsynced on the backing store when the server crashes: the engine
// opened after it must still fsync them at its first flush, which would
// otherwise say everything is durable. Once a flush made them so, an
// engine opened after another crash has nothing left to fsync.
func TestChangesSurviveACrash(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 7)
	var log *nameLog
	r := newRig(t, modelES, 6, func(c *Config) {
		crashable(t, c, fsys)
		log = &nameLog{Store: c.Backing, files: true}
		c.Backing = log
	})
	ctx := context.Background()
	r.writeBacking("d/f", nil)
	r.writeBacking("a/g", []byte("x"))
	if err := r.e.NamesChanged(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	if err := r.e.AttrsChanged(ctx, "a/g"); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Sync(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	// The crash stops the engine before it fsyncs anything: its Close
	// finds the backing store failing.
	r.faulty.SetError(backing.OpSync, errInjected)
	r.faulty.SetError(backing.OpSyncDir, errInjected)
	r.crash(fsys)
	r.faulty.SetError(backing.OpSync, nil)
	r.faulty.SetError(backing.OpSyncDir, nil)
	log.take()
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, log.take(), "first flush after a crash",
		"fsync directory d", "fsync directory .", "fsync file a/g")

	fsys = vfs.NewCrashable(vfs.OS{}, 8)
	r.cfg.FS = fsys
	r.restart()
	log.take()
	r.crash(fsys)
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if events := log.take(); len(events) != 0 {
		t.Errorf("flush after a crash that followed a flush: %q, want nothing fsynced", events)
	}
}

// TestAttrsFollowARename renames files whose attributes changed through
// the cache before a flush fsynced them, and a directory holding one: the
// flush must fsync them under their new names, as by the old ones it
// would find nothing and count them as done.
func TestAttrsFollowARename(t *testing.T) {
	r, log := newAttrRig(t, Cache)
	ctx := context.Background()
	for _, p := range []string{"r/f", "t/x/f", "m/f"} {
		r.writeBacking(p, []byte("x"))
	}
	if err := os.MkdirAll(filepath.Join(r.root, "q"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.e.AttrsChanged(ctx, "r/f", "t/x/f", "m/f"); err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{"r/f": "q/g", "t/x": "u"} {
		if err := os.Rename(filepath.Join(r.root, from), filepath.Join(r.root, to)); err != nil {
			t.Fatal(err)
		}
		if err := r.e.NamesMoved(ctx, from, to); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.e.Rename(ctx, "m/f", "n"); err != nil {
		t.Fatal(err)
	}
	log.take()
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, log.take(), "flush after the renames", "fsync file q/g", "fsync file u/f", "fsync file n")
}

// TestChangesFsyncedAtTheCallCostNoCommit makes names and attributes
// durable at the call, with Durability Backing: no record of them is
// left to write, so the index has nothing to commit for them, where a
// commit would cost an fsync of the index for every change.
func TestChangesFsyncedAtTheCallCostNoCommit(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 3)
	r := newRig(t, modelES, 6, func(c *Config) {
		crashable(t, c, fsys)
		c.Durability = Backing
	})
	ctx := context.Background()
	r.writeBacking("d/f", []byte("x"))
	if err := r.e.NamesChanged(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	if err := r.e.AttrsChanged(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	steps := fsys.Steps()
	r.e.wantChanges()
	if err := r.e.commitOnce(); err != nil {
		t.Fatal(err)
	}
	if got := fsys.Steps() - steps; got != 0 {
		t.Errorf("commit after changes fsynced at the call: %d durable steps, want none", got)
	}
}

// TestChangesAloneWaitForTheirCommit records a name and an attribute
// change with Durability Cache, then has a call wait for a commit that
// has nothing else to write, as a drop before a rename does: it must not
// commit the records alone, an fsync of the index for every such call,
// but a Sync, which promises what came before it, must.
func TestChangesAloneWaitForTheirCommit(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 4)
	r := newRig(t, modelES, 6, func(c *Config) { crashable(t, c, fsys) })
	ctx := context.Background()
	r.writeBacking("d/f", []byte("x"))
	if err := r.e.NamesChanged(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	if err := r.e.AttrsChanged(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	steps := fsys.Steps()
	if err := r.e.waitCommit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fsys.Steps() - steps; got != 0 {
		t.Errorf("commit with only change records queued: %d durable steps, want none", got)
	}
	if err := r.e.Sync(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	if got := fsys.Steps() - steps; got == 0 {
		t.Errorf("Sync after changes: no durable step, want their records committed")
	}
}
