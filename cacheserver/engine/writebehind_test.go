package engine

import (
	"context"
	"io/fs"
	"sync"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// behindFS records the write-behinds asked of its files.
type behindFS struct {
	vfs.OS
	mu     sync.Mutex
	ranges []int64 // offsets of the ranges asked for
}

func (b *behindFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := b.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return behindFile{File: f, fs: b}, nil
}

func (b *behindFS) asked() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int64(nil), b.ranges...)
}

type behindFile struct {
	vfs.File
	fs *behindFS
}

func (f behindFile) WriteBehind(off, _ int64) {
	f.fs.mu.Lock()
	f.fs.ranges = append(f.fs.ranges, off)
	f.fs.mu.Unlock()
}

// TestWriteBehindOncePerCompletedExtent checks when the engine asks the
// slab to start writing an extent to the disk: once, by the write that
// leaves it dirty from end to end; not again while it stays so, and not
// for copy-ups or for extents dirty in part.
func TestWriteBehindOncePerCompletedExtent(t *testing.T) {
	fsys := &behindFS{}
	r := newRig(t, modelES, 8, func(c *Config) { c.FS = fsys })
	quarter := make([]byte, modelES/4)
	for i := range int64(4) {
		if got := fsys.asked(); len(got) != 0 {
			t.Fatalf("write-behind asked for %v before the extent was complete", got)
		}
		r.write("f", i*modelES/4, quarter)
	}
	if got := fsys.asked(); len(got) != 1 {
		t.Fatalf("write-behinds after the extent was written in order: %v, want one", got)
	}
	r.write("f", 0, make([]byte, modelES))
	r.write("f", modelES/2, quarter)
	if got := fsys.asked(); len(got) != 1 {
		t.Fatalf("write-behinds after rewrites of a dirty extent: %v, want still one", got)
	}
	r.write("f", modelES+10, quarter)
	r.writeBacking("g", make([]byte, 2*modelES))
	r.readAll("g")
	if got := fsys.asked(); len(got) != 1 {
		t.Fatalf("write-behinds after a partial write and copy-ups: %v, want still one", got)
	}
	if err := r.e.FlushPath(context.Background(), "f"); err != nil {
		t.Fatal(err)
	}
	r.write("f", 0, make([]byte, modelES))
	if got := fsys.asked(); len(got) != 2 {
		t.Fatalf("write-behinds after the extent was written back and written whole: %v, want two", got)
	}
}
