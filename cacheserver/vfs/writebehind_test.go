package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriteBehindWritesTheRange writes a file and asks for write-behind of
// part of it: that part's pages become clean without a Sync, the rest
// stays dirty.
func TestWriteBehindWritesTheRange(t *testing.T) {
	const mib = 1 << 20
	f, err := OS{}.OpenFile(filepath.Join(t.TempDir(), "slab"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 8*mib), 0); err != nil {
		t.Fatal(err)
	}
	of := f.(osFile).File
	dirty := func(off, n int64) uint64 {
		var cs unix.Cachestat_t
		if err := unix.Cachestat(uint(of.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &cs, 0); err != nil {
			t.Skipf("no cachestat(2) here: %v", err)
		}
		return cs.Dirty + cs.Writeback
	}
	if dirty(0, 8*mib) == 0 {
		t.Skip("the written pages are not dirty: a file system without a page cache")
	}
	f.(WriteBehinder).WriteBehind(2*mib, 4*mib)
	for deadline := time.Now().Add(10 * time.Second); dirty(2*mib, 4*mib) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d pages of the range still dirty 10s after WriteBehind", dirty(2*mib, 4*mib))
		}
	}
	if dirty(0, 2*mib) == 0 || dirty(6*mib, 2*mib) == 0 {
		t.Error("pages outside the range were written too")
	}
}

// TestWriteBehindThenClose closes a file while write-behinds of it may
// still run: Close must neither fail nor leave them writing another file.
func TestWriteBehindThenClose(t *testing.T) {
	for i := range 20 {
		f, err := OS{}.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
			t.Fatal(err)
		}
		f.(WriteBehinder).WriteBehind(0, 1<<20)
		if err := f.Close(); err != nil {
			t.Fatalf("Close %d after WriteBehind: %v", i, err)
		}
	}
}
