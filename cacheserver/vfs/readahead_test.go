package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// resident returns how many pages [off, off+n) of f spans and how many of
// them are in memory.
func resident(t *testing.T, f *os.File, off, n int64) (pages, in int) {
	t.Helper()
	pages, in, err := Resident(f, off, n)
	if err != nil {
		t.Fatal(err)
	}
	return pages, in
}

// TestWillNeedReadsTheRange drops a file from the page cache, asks for a
// range of it, and waits for every page of the range to be read.
func TestWillNeedReadsTheRange(t *testing.T) {
	const mib = 1 << 20
	name := filepath.Join(t.TempDir(), "slab")
	if err := os.WriteFile(name, make([]byte, 16*mib), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OS{}.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	of := f.(osFile).File
	if err := of.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(of.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if _, in := resident(t, of, 4*mib, 8*mib); in != 0 {
		t.Skipf("this file system keeps %d pages of a file that was asked to drop them", in)
	}
	f.(Advisor).WillNeed(4*mib, 8*mib)
	deadline := time.Now().Add(10 * time.Second)
	for {
		pages, in := resident(t, of, 4*mib, 8*mib)
		if in == pages {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages of the range in memory 10s after WillNeed", in, pages)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWillNeedThenClose closes a file while read-aheads of it may still
// run: Close must neither fail nor hang.
func TestWillNeedThenClose(t *testing.T) {
	name := filepath.Join(t.TempDir(), "slab")
	if err := os.WriteFile(name, make([]byte, 64<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 * maxReadAheads {
		f, err := OS{}.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.(Advisor).WillNeed(0, 64<<20)
		if err := f.Close(); err != nil {
			t.Fatalf("Close after WillNeed: %v", err)
		}
	}
}

// TestCachedRangesAreKnown checks the test that spares read-ahead of a
// range the page cache holds: a written file is held whole, and a range
// with a part dropped is not.
func TestCachedRangesAreKnown(t *testing.T) {
	const mib = 1 << 20
	f, err := os.Create(filepath.Join(t.TempDir(), "slab"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 4*mib)); err != nil {
		t.Fatal(err)
	}
	if !cached(f, 0, 4*mib) {
		var cs unix.Cachestat_t
		if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Len: 4 * mib}, &cs, 0); err != nil {
			t.Skipf("no cachestat(2) here: %v", err)
		}
		t.Fatalf("a file just written is not taken for cached (%d pages in the page cache)", cs.Cache)
	}
	if !cached(f, mib+100, 1000) {
		t.Error("a range inside one page is not taken for cached")
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 2*mib, mib, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if _, in := resident(t, f, 2*mib, mib); in != 0 {
		t.Skipf("this file system keeps %d pages it was asked to drop", in)
	}
	if cached(f, mib, 2*mib) {
		t.Error("a range partly out of the page cache is taken for cached")
	}
	if !cached(f, 0, 2*mib) {
		t.Error("the range before the dropped page is not taken for cached")
	}
}
