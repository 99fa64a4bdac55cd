package fusefs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hanwen/go-fuse/v2/splice"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// readCounter is a namespace that counts ReadAt calls.
type readCounter struct {
	*posixns.FS
	reads atomic.Int32
}

func (r *readCounter) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	r.reads.Add(1)
	return r.FS.ReadAt(ctx, p, b, off)
}

// TestPassthrough proves that a descriptor from the Passthrough hook serves
// reads in the kernel, without a READ request reaching the namespace.
func TestPassthrough(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("FUSE passthrough needs CAP_SYS_ADMIN")
	}
	backing, mnt := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(backing, "f"), []byte("through the kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := posixns.New(backing)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fsys := &readCounter{FS: p}
	var hooked atomic.Int32
	opts := Options{DirectMount: true, Passthrough: func(ctx context.Context, path string, flags uint32) (int, bool) {
		fd, err := unix.Open(filepath.Join(backing, path), int(flags&unix.O_ACCMODE)|unix.O_CLOEXEC, 0)
		hooked.Add(1)
		return fd, err == nil
	}}
	s, err := Mount(mnt, fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unmount()
	got, err := os.ReadFile(filepath.Join(mnt, "f"))
	if err != nil || string(got) != "through the kernel" {
		t.Fatalf("read %q, %v", got, err)
	}
	if hooked.Load() != 1 || fsys.reads.Load() != 0 {
		t.Fatalf("hook called %d times, namespace read %d times; want 1 and 0", hooked.Load(), fsys.reads.Load())
	}
}

// TestBytesInMemoryAreNotSpliced proves that a read whose bytes the
// namespace copied into memory goes to the kernel in one write, without
// the pipe go-fuse fills and empties again when it tries to splice them.
func TestBytesInMemoryAreNotSpliced(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(backing, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	splice.ClearSplicePool()
	for _, size := range []int{4 << 10, 64 << 10, 256 << 10} {
		got := make([]byte, size)
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[:size]) {
			t.Fatalf("read of %d bytes differs from the file", size)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
	}
	if n := splice.Total(); n != 0 {
		t.Fatalf("reads took %d pipes from go-fuse's pool, want none", n)
	}
}
