package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// failingWrites is a namespace whose writes fail with EIO once broken, as
// those to an unreachable server do.
type failingWrites struct {
	namespace.FS
	broken atomic.Bool
}

func (f *failingWrites) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	if f.broken.Load() {
		return 0, syscall.EIO
	}
	return f.FS.WriteAt(ctx, p, b, off)
}

// mountFailing mounts a fresh backing directory whose writes can be broken.
func mountFailing(t *testing.T, opts Options) (string, *failingWrites, *Server) {
	t.Helper()
	mnt, _, fsys, s := mountOver(t, opts, func(p *posixns.FS) *failingWrites { return &failingWrites{FS: p} })
	return mnt, fsys, s
}

// TestDroppedWriteBackIsReported writes a file through a shared mapping
// after its last close, with the writes failing: the kernel writes the
// pages back as the mapping goes, drops them when that fails, and tells
// nobody, since no close or fsync follows. The mount must tell.
func TestDroppedWriteBackIsReported(t *testing.T) {
	for name, opts := range map[string]Options{"no client cache": {}, "client cache": {ClientCache: true}} {
		t.Run(name, func(t *testing.T) {
			mnt, fsys, s := mountFailing(t, opts)
			p := filepath.Join(mnt, "f")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, 1<<16); err != nil {
				t.Fatal(err)
			}
			m := mapShared(t, p, 1<<16)
			m.closeFile()
			m.write(0, "lost unless someone says so")
			fsys.broken.Store(true)
			m.unmap()
			if err := s.Dropped(); !errors.Is(err, ErrWritesDropped) {
				t.Fatalf("Dropped after a failed write-back of a mapping: %v, want ErrWritesDropped", err)
			}
		})
	}
}

// TestFailedWriteIsItsCallers: a write(2) that fails without the client
// cache fails to its caller, who knows; the mount does not count it.
func TestFailedWriteIsItsCallers(t *testing.T) {
	mnt, fsys, s := mountFailing(t, Options{})
	fsys.broken.Store(true)
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write to a broken namespace: %v, want EIO", err)
	}
	if err := s.Dropped(); err != nil {
		t.Fatalf("Dropped after a write that failed to its caller: %v, want nil", err)
	}
}
