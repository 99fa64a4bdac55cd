package vfs

import (
	"os"
	"path/filepath"
	"strings"
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

// dropped returns a file of 16 MiB with none of its pages in memory.
func dropped(t *testing.T) *os.File {
	t.Helper()
	name := filepath.Join(t.TempDir(), "slab")
	if err := os.WriteFile(name, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if _, in := resident(t, f, 0, 16<<20); in != 0 {
		t.Skipf("this file system keeps %d pages of a file that was asked to drop them", in)
	}
	return f
}

// waitResident waits until every page of [off, off+n) of f is in memory.
func waitResident(t *testing.T, f *os.File, off, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pages, in := resident(t, f, off, n)
		if in == pages {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages of the range in memory after 10s", in, pages)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWillNeedReadsTheRange drops a file from the page cache, asks for a
// range of it, and waits for every page of the range to be read.
func TestWillNeedReadsTheRange(t *testing.T) {
	const mib = 1 << 20
	f := dropped(t)
	osFile{f}.WillNeed(5*mib, 8*mib)
	waitResident(t, f, 5*mib, 8*mib)
}

// TestReadAheadWays checks each way a read-ahead reads: through a mapping,
// which it must not leave behind, and by splicing.
func TestReadAheadWays(t *testing.T) {
	const mib = 1 << 20
	t.Run("populate", func(t *testing.T) {
		f := dropped(t)
		if err := populate(f, 5*mib, 8*mib); err != nil {
			t.Skipf("no huge-page mapping of files here: %v", err)
		}
		if pages, in := resident(t, f, 5*mib, 8*mib); in != pages {
			t.Errorf("%d of %d pages of the range in memory after populate", in, pages)
		}
		if err := populate(f, 15*mib, 4*mib); err != nil {
			t.Errorf("populate of a range past the end of the file: %v", err)
		}
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(maps), f.Name()) {
			t.Errorf("populate left the file mapped:\n%s", maps)
		}
	})
	t.Run("splice", func(t *testing.T) {
		f := dropped(t)
		done, err := spliceToNull(f, 5*mib, 8*mib)
		if err != nil || done != 8*mib {
			t.Fatalf("spliceToNull = %d, %v; want %d", done, err, 8*mib)
		}
		if pages, in := resident(t, f, 5*mib, 8*mib); in != pages {
			t.Errorf("%d of %d pages of the range in memory after the splice", in, pages)
		}
	})
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
	// Large folios keep pages of a range dropped in part, so the whole
	// file is dropped and its first half read again page by page.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 2*mib), 0); err != nil {
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
