package engine

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// syncFaultFS is the operating system's file system, whose fdatasync of
// the slab fails with EIO while fail is set. Its slab file offers none of
// the optional interfaces (descriptor writes, read-ahead), so the engine
// takes its plain paths over it.
type syncFaultFS struct {
	vfs.FS
	fail atomic.Bool
}

func (s *syncFaultFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Base(name) != "slab" {
		return f, err
	}
	return &syncFaultFile{File: f, fail: &s.fail}, nil
}

type syncFaultFile struct {
	vfs.File
	fail *atomic.Bool
}

func (f *syncFaultFile) Sync() error {
	if f.fail.Load() {
		return syscall.EIO
	}
	return f.File.Sync()
}

// TestFailedSlabFsyncStopsWritesNotWriteBack fails one fdatasync of the
// slab. The kernel reports such a failure once: a later fdatasync that
// succeeds does not prove the pages that failed reached the disk, so no
// Sync may succeed again. New writes fail, the kernel's page write-back
// (Accepted) still goes in, reads go on, and a flush writes every dirty
// byte back to the backing store.
func TestFailedSlabFsyncStopsWritesNotWriteBack(t *testing.T) {
	fsys := &syncFaultFS{FS: vfs.OS{}}
	r := newRig(t, 4096, 64, func(c *Config) {
		c.FS = fsys
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 90, DirtyLow: 80}
	})
	ctx := context.Background()
	data := bytes.Repeat([]byte("a"), 10000)
	// Failing first, so that no commit of the write can succeed before.
	fsys.fail.Store(true)
	r.write("f", 0, data)
	if err := r.e.Sync(ctx, "f"); !errors.Is(err, ErrCacheDevice) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync while fdatasync fails = %v, want ErrCacheDevice wrapping EIO", err)
	}
	fsys.fail.Store(false)
	if err := r.e.Sync(ctx, "f"); !errors.Is(err, ErrCacheDevice) {
		t.Fatalf("Sync after a failed fdatasync = %v, want ErrCacheDevice", err)
	}
	if _, err := r.e.WriteAt(ctx, "g", []byte("new"), 0); !errors.Is(err, ErrCacheDevice) {
		t.Fatalf("a new write after the failure = %v, want ErrCacheDevice", err)
	}
	if err := r.e.AdmitWriter("g", false); !errors.Is(err, ErrCacheDevice) {
		t.Fatalf("an open for writing after the failure = %v, want ErrCacheDevice", err)
	}
	if _, err := r.e.WriteAt(Accepted(ctx), "f", []byte("b"), 0); err != nil {
		t.Fatalf("a page written back by a client's kernel after the failure: %v", err)
	}
	data[0] = 'b'
	if s := r.e.Stats(); !strings.Contains(s.DeviceError, "fdatasync") || s.DirtyBytes != int64(len(data)) {
		t.Fatalf("stats after the failure: device error %q, dirty %d", s.DeviceError, s.DirtyBytes)
	}
	if got := r.readAll("f"); !bytes.Equal(got, data) {
		t.Fatalf("read after the failure: %.10q..., want %.10q...", got, data)
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush after the failure: %v", err)
	}
	if got := r.backingFile("f"); !bytes.Equal(got, data) {
		t.Fatalf("backing file after the flush: %.10q... (%d bytes), want %.10q... (%d)", got, len(got), data, len(data))
	}
	if got := r.backingFile("g"); got != nil {
		t.Fatalf("the refused write reached the backing store: %q", got)
	}
}
