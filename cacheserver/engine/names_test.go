package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// nameLog is a backing store that records, in order, the files that
// write-back created and the directories fsynced, to check that the name
// of a file is durable before the engine says its data is.
type nameLog struct {
	backing.Store
	root string
	// files has file fsyncs recorded too.
	files bool

	mu     sync.Mutex
	events []string
}

func (s *nameLog) add(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event)
}

func (s *nameLog) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	if _, err := os.Stat(filepath.Join(s.root, p)); errors.Is(err, os.ErrNotExist) {
		s.add("create " + p)
	}
	return s.Store.WriteAt(ctx, p, b, off)
}

func (s *nameLog) SyncDir(ctx context.Context, p string) error {
	err := s.Store.SyncDir(ctx, p)
	if err == nil {
		s.add("fsync directory " + p)
	}
	return err
}

func (s *nameLog) Sync(ctx context.Context, p string) error {
	err := s.Store.Sync(ctx, p)
	if err == nil && s.files {
		s.add("fsync file " + p)
	}
	return err
}

// take returns the events since the last call.
func (s *nameLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.events
	s.events = nil
	return ev
}

// wantNamed fails the test unless events hold the creation of p followed by
// an fsync of every directory from p's own up to the root.
func wantNamed(t *testing.T, events []string, p string) {
	t.Helper()
	created := slices.Index(events, "create "+p)
	if created < 0 {
		t.Fatalf("events %q: no creation of %s", events, p)
	}
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		if !slices.Contains(events[created:], "fsync directory "+dir) {
			t.Errorf("events %q: directory %q not fsynced after %s was created", events, dir, p)
		}
		if dir == "." {
			return
		}
	}
}

func newNameRig(t *testing.T, durability Durability) (*rig, *nameLog) {
	var log *nameLog
	r := newRig(t, 4096, 64, func(c *Config) {
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 90, DirtyLow: 80}
		c.Durability = durability
		log = &nameLog{Store: c.Backing}
		c.Backing = log
	})
	log.root = r.root
	return r, log
}

// TestFlushMakesNamesDurable writes files that the backing store lacks,
// in directories it lacks too, and flushes: write-back creates them, and
// before the flush returns, saying that everything is on the backing
// store, the directories from each file's own up to the root must be
// fsynced, or a crash of the backing store's node could lose the names of
// files whose data it acknowledged. A file whose name was made durable
// costs no more.
func TestFlushMakesNamesDurable(t *testing.T) {
	r, log := newNameRig(t, Cache)
	ctx := context.Background()
	files := []string{"a/b/f", "a/b/g", "a/h", "top"}
	for i, p := range files {
		r.write(p, 0, bytes.Repeat([]byte{byte('0' + i)}, 5000))
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	events := log.take()
	for _, p := range files {
		wantNamed(t, events, p)
	}
	r.write("a/b/f", 100, []byte("again"))
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if events := log.take(); len(events) != 0 {
		t.Errorf("write-back of a file whose name is durable: %q, want no directory fsynced", events)
	}
}

// TestBackingSyncMakesNamesDurable syncs a new file with Durability
// Backing, as a close or fsync through a mount does: the call must return
// only once the name of the file is durable too. A file the backing store
// holds, but the engine does not (created through a mount, with no data
// yet), gets its name made durable too.
func TestBackingSyncMakesNamesDurable(t *testing.T) {
	r, log := newNameRig(t, Backing)
	ctx := context.Background()
	r.write("d/e/f", 0, []byte("data"))
	if err := r.e.Sync(ctx, "d/e/f"); err != nil {
		t.Fatal(err)
	}
	wantNamed(t, log.take(), "d/e/f")
	r.writeBacking("made/by/create", nil)
	if err := r.e.Sync(ctx, "made/by/create"); err != nil {
		t.Fatal(err)
	}
	want := []string{"fsync directory made/by", "fsync directory made", "fsync directory ."}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("Sync of a file the engine does not hold (-want +got):\n%s", diff)
	}
}

// TestFailedDirectoryFsyncKeepsExtentsDirty fails the fsync of backing
// directories: the extents stay dirty and a flush says why, as when the
// fsync of the file fails; once it works, they are written back.
func TestFailedDirectoryFsyncKeepsExtentsDirty(t *testing.T) {
	r := newRig(t, 4096, 64, func(c *Config) {
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 90, DirtyLow: 80}
	})
	r.faulty.SetError(backing.OpSyncDir, errInjected)
	data := bytes.Repeat([]byte("d"), 10000)
	r.write("d/f", 0, data)
	fctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.e.Flush(fctx); !errors.Is(err, ErrDirtyLeft) || !errors.Is(err, errInjected) {
		t.Fatalf("Flush while directory fsync fails = %v, want ErrDirtyLeft wrapping its error", err)
	}
	if s := r.e.Stats(); s.DirtyBytes != int64(len(data)) {
		t.Fatalf("dirty bytes while directory fsync fails: %d, want %d", s.DirtyBytes, len(data))
	}
	r.faulty.SetError(backing.OpSyncDir, nil)
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatalf("Flush once directory fsync works: %v", err)
	}
	if s := r.e.Stats(); s.DirtyBytes != 0 {
		t.Fatalf("dirty bytes after the flush: %d", s.DirtyBytes)
	}
}

// TestReplacedFileNameIsNotDurable removes a file and its directories
// from the backing store behind the cache, after the file's name was made
// durable, and invalidates the path (or has an unlink forget what the
// cache saw of it): the name the file gets next, which the write-back
// makes with the directories, is not the one made durable, and the flush
// must fsync the directories again.
func TestReplacedFileNameIsNotDurable(t *testing.T) {
	for name, forget := range map[string]func(r *rig, p string) error{
		"invalidate file":      func(r *rig, p string) error { return r.e.InvalidatePath(context.Background(), p) },
		"invalidate directory": func(r *rig, p string) error { return r.e.InvalidatePath(context.Background(), "d") },
		"forget removed":       func(r *rig, p string) error { return r.e.ForgetRemoved(context.Background(), p) },
	} {
		t.Run(name, func(t *testing.T) {
			r, log := newNameRig(t, Cache)
			ctx := context.Background()
			r.write("d/e/f", 0, []byte("first"))
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			wantNamed(t, log.take(), "d/e/f")
			if err := os.RemoveAll(filepath.Join(r.root, "d")); err != nil {
				t.Fatal(err)
			}
			if err := forget(r, "d/e/f"); err != nil {
				t.Fatal(err)
			}
			r.write("d/e/f", 0, []byte("second"))
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			wantNamed(t, log.take(), "d/e/f")
		})
	}
}

// wantDirsSynced fails the test unless events hold an fsync of each of
// dirs.
func wantDirsSynced(t *testing.T, events []string, what string, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		if !slices.Contains(events, "fsync directory "+dir) {
			t.Errorf("%s: events %q, want directory %q fsynced", what, events, dir)
		}
	}
}

// TestRenameMakesNamesDurable renames files and trees whose data, and
// names, are durable on the backing store: the directory of the new name,
// those above it, and the directory of the old name must be fsynced
// before the cache says that the rename is on the backing store, or a
// crash of its node could bring back the old name, or lose both when the
// old one was new. With Durability Backing that is when the rename
// returns, since a close after it need not reach this engine; with Cache,
// when a flush returns.
func TestRenameMakesNamesDurable(t *testing.T) {
	for name, tc := range map[string]struct {
		durability     Durability
		from, to, file string
		wantDirs       []string
	}{
		"file, Backing":      {Backing, "a/f", "b/c/g", "a/f", []string{"a", "b/c", "b", "."}},
		"file, Cache":        {Cache, "a/f", "b/c/g", "a/f", []string{"a", "b/c", "b", "."}},
		"directory, Backing": {Backing, "t/x", "u/v", "t/x/y/f", []string{"t", "u", "."}},
		"directory, Cache":   {Cache, "t/x", "u/v", "t/x/y/f", []string{"t", "u", "."}},
	} {
		t.Run(name, func(t *testing.T) {
			r, log := newNameRig(t, tc.durability)
			ctx := context.Background()
			r.write(tc.file, 0, []byte("data"))
			if err := os.MkdirAll(filepath.Join(r.root, filepath.Dir(tc.to)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			log.take()
			if err := r.e.Rename(ctx, tc.from, tc.to); err != nil {
				t.Fatal(err)
			}
			if tc.durability == Backing {
				wantDirsSynced(t, log.take(), "rename", tc.wantDirs...)
				return
			}
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			wantDirsSynced(t, log.take(), "flush after the rename", tc.wantDirs...)
		})
	}
}

// TestNamesMadeThroughTheCacheAreDurable has the backing store hold names
// that calls through the cache made there without write-back (a create
// of a file that gets no data, a mkdir): the engine is told, and must
// make them durable, as data that write-back created, before a flush
// (of everything, or of the path) returns, or, with Durability Backing,
// before it returns itself. A second flush has nothing left to fsync.
func TestNamesMadeThroughTheCacheAreDurable(t *testing.T) {
	for _, durability := range []Durability{Cache, Backing} {
		t.Run(string(durability), func(t *testing.T) {
			r, log := newNameRig(t, durability)
			ctx := context.Background()
			r.writeBacking("made/by/create", nil)
			if err := os.Mkdir(filepath.Join(r.root, "made/dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := r.e.NamesChanged(ctx, "made/by/create", "made/dir"); err != nil {
				t.Fatal(err)
			}
			if durability == Cache {
				if events := log.take(); len(events) != 0 {
					t.Errorf("NamesChanged with Durability Cache: %q, want nothing fsynced before a flush", events)
				}
				if err := r.e.FlushPath(ctx, "made"); err != nil {
					t.Fatal(err)
				}
			}
			wantDirsSynced(t, log.take(), "names made through the cache", "made/by", "made", ".")
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if events := log.take(); len(events) != 0 {
				t.Errorf("second flush: %q, want nothing fsynced", events)
			}
		})
	}
}

// TestFailedNameFsyncIsRetried fails the fsync of the directories of a
// name made through the cache: NamesChanged with Durability Backing says
// so, and so does every flush, until the fsync works.
func TestFailedNameFsyncIsRetried(t *testing.T) {
	r, log := newNameRig(t, Backing)
	ctx := context.Background()
	r.writeBacking("d/f", nil)
	r.faulty.SetError(backing.OpSyncDir, errInjected)
	if err := r.e.NamesChanged(ctx, "d/f"); !errors.Is(err, errInjected) {
		t.Fatalf("NamesChanged while directory fsync fails = %v, want its error", err)
	}
	if err := r.e.Flush(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("Flush while directory fsync fails = %v, want its error", err)
	}
	r.faulty.SetError(backing.OpSyncDir, nil)
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush once directory fsync works: %v", err)
	}
	wantDirsSynced(t, log.take(), "flush once directory fsync works", "d", ".")
}

// TestNameInRemovedDirectory removes the directory of a name made through
// the cache before the flush: it has no entries left to make durable,
// its removal is its parent's, and the flush must fsync that one and
// succeed, not fail for ever.
func TestNameInRemovedDirectory(t *testing.T) {
	for name, replace := range map[string]func(t *testing.T, dir string){
		"removed": func(*testing.T, string) {},
		"replaced by a file": func(t *testing.T, dir string) {
			if err := os.WriteFile(dir, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"replaced by a symbolic link": func(t *testing.T, dir string) {
			if err := os.Symlink(".", dir); err != nil {
				t.Fatal(err)
			}
		},
		"replaced by a symbolic link out of the backing directory": func(t *testing.T, dir string) {
			if err := os.Symlink("/", dir); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			r, log := newNameRig(t, Cache)
			ctx := context.Background()
			r.writeBacking("a/x/f", nil)
			if err := r.e.NamesChanged(ctx, "a/x/f"); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(r.root, "a/x")
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			replace(t, dir)
			if err := r.e.Flush(ctx); err != nil {
				t.Fatalf("Flush after the directory was %s: %v", name, err)
			}
			wantDirsSynced(t, log.take(), "flush", "a", ".")
		})
	}
}

// TestNamesChangedSyncsItsOwn has a name change with Durability Backing
// come while another one's directory waits for a retry: the call fsyncs
// only its own directories, as calls at once that each fsynced every
// directory waiting would fsync each of them once per call. The one
// waiting is left to Flush or Sync.
func TestNamesChangedSyncsItsOwn(t *testing.T) {
	r, log := newNameRig(t, Backing)
	ctx := context.Background()
	r.writeBacking("x/f", nil)
	r.writeBacking("y/g", nil)
	r.faulty.SetError(backing.OpSyncDir, errInjected)
	if err := r.e.NamesChanged(ctx, "x/f"); !errors.Is(err, errInjected) {
		t.Fatalf("NamesChanged while directory fsync fails = %v, want its error", err)
	}
	r.faulty.SetError(backing.OpSyncDir, nil)
	if err := r.e.NamesChanged(ctx, "y/g"); err != nil {
		t.Fatal(err)
	}
	want := []string{"fsync directory y", "fsync directory ."}
	if diff := cmp.Diff(want, log.take()); diff != "" {
		t.Errorf("NamesChanged of y/g (-want +got):\n%s", diff)
	}
	if err := r.e.Sync(ctx, "y/g"); err != nil {
		t.Fatal(err)
	}
	wantDirsSynced(t, log.take(), "Sync after the failure", "x")
}

// TestCloseMakesChangedNamesDurable closes an engine with Durability Cache
// that was told of a name no flush made durable yet: the engine after it
// does not know of the name, and no flush would make it durable, so the
// close must.
func TestCloseMakesChangedNamesDurable(t *testing.T) {
	r, log := newNameRig(t, Cache)
	r.writeBacking("c/f", nil)
	if err := r.e.NamesChanged(context.Background(), "c/f"); err != nil {
		t.Fatal(err)
	}
	r.restart()
	wantDirsSynced(t, log.take(), "close", "c", ".")
}

// TestFlushMakesRemovalsDurable removes names through the cache (a
// metadata server's unlink, which tells NamesRemoved, and Unlink): the
// call does not wait for their directories' fsync, whatever the
// durability, but a flush must, or a crash of the backing store's node
// after it could bring back files the job removed.
func TestFlushMakesRemovalsDurable(t *testing.T) {
	for _, durability := range []Durability{Cache, Backing} {
		t.Run(string(durability), func(t *testing.T) {
			r, log := newNameRig(t, durability)
			ctx := context.Background()
			r.writeBacking("gone/f", []byte("x"))
			r.write("also/gone", 0, []byte("data"))
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			log.take()
			if err := os.Remove(filepath.Join(r.root, "gone/f")); err != nil {
				t.Fatal(err)
			}
			r.e.NamesRemoved(ctx, "gone/f")
			if err := r.e.Unlink(ctx, "also/gone"); err != nil {
				t.Fatal(err)
			}
			if events := log.take(); len(events) != 0 {
				t.Errorf("removals: %q, want nothing fsynced before a flush", events)
			}
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			wantDirsSynced(t, log.take(), "flush after the removals", "gone", "also", ".")
		})
	}
}
