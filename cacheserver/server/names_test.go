package server_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// dirSyncLog records the backing directories that the engines of several
// servers fsynced, and the files, as "file " and the path.
type dirSyncLog struct {
	mu   sync.Mutex
	dirs []string
}

// store wraps s so that its directory fsyncs are recorded.
func (l *dirSyncLog) store(s backing.Store) backing.Store { return &dirSyncStore{Store: s, log: l} }

// take returns the directories fsynced since the last call.
func (l *dirSyncLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	dirs := l.dirs
	l.dirs = nil
	return dirs
}

type dirSyncStore struct {
	backing.Store
	log *dirSyncLog
}

func (s *dirSyncStore) SyncDir(ctx context.Context, p string) error {
	err := s.Store.SyncDir(ctx, p)
	if err == nil {
		s.log.mu.Lock()
		s.log.dirs = append(s.log.dirs, p)
		s.log.mu.Unlock()
	}
	return err
}

// Sync records an fsync of the file p as "file p".
func (s *dirSyncStore) Sync(ctx context.Context, p string) error {
	err := s.Store.Sync(ctx, p)
	if err == nil {
		s.log.mu.Lock()
		s.log.dirs = append(s.log.dirs, "file "+p)
		s.log.mu.Unlock()
	}
	return err
}

// wantSynced fails the test unless got holds each of want.
func wantSynced(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	for _, dir := range want {
		if !slices.Contains(got, dir) {
			t.Errorf("%s: directories fsynced %q, want %q among them", what, got, dir)
		}
	}
}

// startNamed starts three servers with engines of durability d whose
// directory fsyncs log records, and a client of them.
func startNamed(t *testing.T, d engine.Durability, log *dirSyncLog) (*client.FS, []string) {
	t.Helper()
	data, ctl, _ := startServers(t, "tcp", t.TempDir(), 3, same, log.store, func(c *engine.Config) { c.Durability = d })
	f, err := client.New(client.Options{Servers: data, ExtentSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f, ctl
}

// makeAndRename creates, through f, a file without data in a new
// directory and closes it, then renames it into another: the calls a
// metadata server runs on the backing store itself. between runs after
// the create and after the rename, with what each must make durable.
func makeAndRename(t *testing.T, f *client.FS, between func(what string, want ...string)) {
	t.Helper()
	ctx := context.Background()
	for _, dir := range []string{"a", "b"} {
		if _, err := f.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Create(ctx, "a/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx, "a/f"); err != nil {
		t.Fatal(err)
	}
	between("create", "a", ".")
	if err := f.Rename(ctx, "a/f", "b/g", 0); err != nil {
		t.Fatal(err)
	}
	between("rename", "a", "b", ".")
}

// TestFlushMakesNamesOfMetadataCallsDurable creates a file that gets no
// data through a mount's client, and renames it: the metadata server runs
// both on the backing store, and no write-back comes to fsync their
// directories, which a flush, saying that everything is on the backing
// store, must do, or a crash of its node could lose the file, or bring
// back its old name.
func TestFlushMakesNamesOfMetadataCallsDurable(t *testing.T) {
	log := &dirSyncLog{}
	f, ctl := startNamed(t, engine.Cache, log)
	makeAndRename(t, f, func(what string, want ...string) {
		log.take()
		for _, addr := range ctl {
			if res, err := control.NewClient(addr, nil, nil).Flush(context.Background()); err != nil || res.RemainingBytes != 0 {
				t.Fatalf("Flush = %+v, %v", res, err)
			}
		}
		wantSynced(t, "flush after the "+what, log.take(), want...)
	})
}

// TestBackingNamesDurableOnReturn is TestFlushMakesNamesOfMetadataCallsDurable
// with Durability Backing: a close of the new file, which wrote nothing
// and so asks no server, and the rename must each return with the names
// durable already, and so must the other calls that make names.
func TestBackingNamesDurableOnReturn(t *testing.T) {
	log := &dirSyncLog{}
	f, _ := startNamed(t, engine.Backing, log)
	makeAndRename(t, f, func(what string, want ...string) {
		wantSynced(t, what, log.take(), want...)
	})
	ctx := context.Background()
	for name, tc := range map[string]struct {
		make func() error
		want []string
	}{
		"mkdir":   {func() error { _, err := f.Mkdir(ctx, "b/c", 0o755); return err }, []string{"b", "."}},
		"symlink": {func() error { _, err := f.Symlink(ctx, "g", "a/s"); return err }, []string{"a", "."}},
		"link":    {func() error { _, err := f.Link(ctx, "b/g", "a/l"); return err }, []string{"a", "."}},
		"mknod":   {func() error { _, err := f.Mknod(ctx, "b/p", syscall.S_IFIFO|0o644, 0); return err }, []string{"b", "."}},
	} {
		log.take()
		if err := tc.make(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantSynced(t, name, log.take(), tc.want...)
	}
}

// TestFlushMakesRemovalsOfMetadataCallsDurable unlinks a file and
// removes its directory through a mount's client: a flush must make the
// removals durable, or a crash of the backing store's node after it could
// bring back names the job removed.
func TestFlushMakesRemovalsOfMetadataCallsDurable(t *testing.T) {
	log := &dirSyncLog{}
	f, ctl := startNamed(t, engine.Cache, log)
	ctx := context.Background()
	flush := func(what string, want ...string) {
		t.Helper()
		for _, addr := range ctl {
			if res, err := control.NewClient(addr, nil, nil).Flush(ctx); err != nil || res.RemainingBytes != 0 {
				t.Fatalf("Flush = %+v, %v", res, err)
			}
		}
		wantSynced(t, "flush after the "+what, log.take(), want...)
	}
	if _, err := f.Mkdir(ctx, "a", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Create(ctx, "a/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		t.Fatal(err)
	}
	flush("create")
	if err := f.Unlink(ctx, "a/f"); err != nil {
		t.Fatal(err)
	}
	flush("unlink", "a", ".")
	if err := f.Rmdir(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	flush("rmdir", ".")
}

// TestSetAttrsOfMetadataCallsDurable changes the size, mode and times of
// a file whose data is on the backing store through a mount's client:
// the metadata server applies each to the backing file at the call, and
// no write-back comes to fsync the file, which a flush, saying that
// everything is on the backing store, must do (with Durability Backing,
// the call before it returns), or a crash of its node could bring back
// the old size, with the bytes past the new end, or the old mode.
func TestSetAttrsOfMetadataCallsDurable(t *testing.T) {
	mode, size, mtime := uint32(0o600), int64(2), time.Unix(1e9, 0)
	for name, change := range map[string]func(ctx context.Context, f *client.FS) error{
		"chmod":    func(ctx context.Context, f *client.FS) error { return setAttr(ctx, f, namespace.SetAttr{Mode: &mode}) },
		"truncate": func(ctx context.Context, f *client.FS) error { return setAttr(ctx, f, namespace.SetAttr{Size: &size}) },
		"utimes": func(ctx context.Context, f *client.FS) error {
			return setAttr(ctx, f, namespace.SetAttr{Mtime: &mtime})
		},
		"ftruncate": func(ctx context.Context, f *client.FS) error {
			_, err := f.TruncateOpen(ctx, "a/f", size)
			return err
		},
		"open with O_TRUNC": func(ctx context.Context, f *client.FS) error {
			_, err := f.Open(ctx, "a/f", os.O_WRONLY|os.O_TRUNC)
			return err
		},
		"setxattr": func(ctx context.Context, f *client.FS) error {
			return f.Setxattr(ctx, "a/f", "user.k", []byte("v"), 0)
		},
	} {
		for _, d := range []engine.Durability{engine.Cache, engine.Backing} {
			t.Run(name+", "+string(d), func(t *testing.T) {
				log := &dirSyncLog{}
				f, ctl := startNamed(t, d, log)
				ctx := context.Background()
				writeFlushed(t, f, ctl)
				log.take()
				if err := change(ctx, f); errors.Is(err, syscall.ENOTSUP) {
					t.Skipf("%s: %v", name, err)
				} else if err != nil {
					t.Fatal(err)
				}
				if d == engine.Cache {
					flushAll(t, ctl)
				}
				wantSynced(t, name, log.take(), "file a/f")
			})
		}
	}
}

func setAttr(ctx context.Context, f *client.FS, in namespace.SetAttr) error {
	_, err := f.SetAttr(ctx, "a/f", in)
	return err
}

// writeFlushed writes a file a/f through f and flushes every server, so
// that nothing of it is left to write back.
func writeFlushed(t *testing.T, f *client.FS, ctl []string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.Mkdir(ctx, "a", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Create(ctx, "a/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, "a/f", []byte("bytes the truncate cuts off"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx, "a/f"); err != nil {
		t.Fatal(err)
	}
	flushAll(t, ctl)
}

// flushAll flushes every server through its control address.
func flushAll(t *testing.T, ctl []string) {
	t.Helper()
	for _, addr := range ctl {
		if res, err := control.NewClient(addr, nil, nil).Flush(context.Background()); err != nil || res.RemainingBytes != 0 {
			t.Fatalf("Flush = %+v, %v", res, err)
		}
	}
}

// TestSetAttrsFollowARename changes the mode of a file through a mount's
// client with Durability Cache and renames its directory before a flush:
// the flush must fsync the file under its new name. (A rename of the file
// itself has the client set the modification time of the new name,
// which records that name too.) The directory and the file have the same
// metadata server here, which records both the mode change and the
// rename: a server moves only the changes it recorded itself.
func TestSetAttrsFollowARename(t *testing.T) {
	log := &dirSyncLog{}
	f, ctl := startNamed(t, engine.Cache, log)
	ctx := context.Background()
	writeFlushed(t, f, ctl)
	mode := uint32(0o600)
	if err := setAttr(ctx, f, namespace.SetAttr{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename(ctx, "a", "b", 0); err != nil {
		t.Fatal(err)
	}
	log.take()
	flushAll(t, ctl)
	wantSynced(t, "flush after the rename", log.take(), "file b/f")
}
