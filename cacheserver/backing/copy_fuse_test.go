package backing

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// directNode is a loopback node whose files are opened for direct I/O, as
// file systems in front of remote storage open them, and that records the
// size of every read the kernel asks it for.
type directNode struct {
	*fs.LoopbackNode
	reads *readLog
}

type readLog struct {
	mu    sync.Mutex
	sizes []int
}

// take returns the sizes logged so far and empties the log.
func (l *readLog) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sizes
	l.sizes = nil
	return s
}

var _ fs.NodeOpener = (*directNode)(nil)

func (n *directNode) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &directNode{LoopbackNode: ops.(*fs.LoopbackNode), reads: n.reads}
}

func (n *directNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, _, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &loggedFile{FileHandle: fh, reads: n.reads}, fuse.FOPEN_DIRECT_IO, 0
}

type loggedFile struct {
	fs.FileHandle
	reads *readLog
}

func (f *loggedFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.reads.mu.Lock()
	f.reads.sizes = append(f.reads.sizes, len(dest))
	f.reads.mu.Unlock()
	return f.FileHandle.(fs.FileReader).Read(ctx, dest, off)
}

func (f *loggedFile) Release(ctx context.Context) syscall.Errno {
	return f.FileHandle.(fs.FileReleaser).Release(ctx)
}

// mountDirect mounts dir with directNode, or skips the test where FUSE
// cannot be mounted.
func mountDirect(t *testing.T, dir string) (string, *readLog) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting FUSE needs root")
	}
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := &readLog{}
	mnt := t.TempDir()
	srv, err := fs.Mount(mnt, &directNode{LoopbackNode: root.(*fs.LoopbackNode), reads: log}, &fs.Options{
		MountOptions: fuse.MountOptions{MaxWrite: 1 << 20, DirectMountStrict: true},
	})
	if err != nil {
		t.Skipf("cannot mount FUSE: %v", err)
	}
	t.Cleanup(func() { _ = srv.Unmount() })
	return mnt, log
}

// TestCopyFromFUSEAsksForEachRangeAtOnce copies ranges of a file of a FUSE
// file system that opens files for direct I/O: each range must reach the
// file system as one read of the whole range. Splice would read it through
// the page cache in read-ahead-sized pieces, one after the other, each a
// round trip to remote storage.
func TestCopyFromFUSEAsksForEachRangeAtOnce(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 4*mib/16)
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	mnt, log := mountDirect(t, dir)
	dst := openDst(t, t.TempDir(), len(data))
	err := NewDir(mnt).CopyRanges(context.Background(), "f", func(cp CopyFunc, readsAhead bool) error {
		if readsAhead {
			t.Error("CopyRanges says the kernel reads a file opened for direct I/O ahead")
		}
		for off := int64(0); off < int64(len(data)); off += mib {
			if n, err := cp(off, int(dst.Fd()), off, mib); n != mib || err != nil {
				t.Errorf("copy at %d = %d, %v; want %d", off, n, err, mib)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := dst.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, data); i >= 0 {
		t.Fatalf("destination differs at %d", i)
	}
	if got, want := log.take(), []int{mib, mib, mib, mib}; !slices.Equal(got, want) {
		t.Fatalf("CopyRanges asked the file system for reads of %v bytes, want %v", got, want)
	}
	// A single copy asks for nothing more either: no read-ahead of the
	// next range, which direct I/O would read again.
	if n, err := NewDir(mnt).CopyRange(context.Background(), "f", mib, int(dst.Fd()), 0, mib); n != mib || err != nil {
		t.Fatalf("CopyRange = %d, %v; want %d", n, err, mib)
	}
	if got, want := log.take(), []int{mib}; !slices.Equal(got, want) {
		t.Fatalf("CopyRange asked the file system for reads of %v bytes, want %v", got, want)
	}
}
