package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports, page by page, whether [off, off+n) of f is in the page
// cache.
func resident(t *testing.T, f *os.File, off, n int64) []bool {
	t.Helper()
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

func count(pages []bool) (in int) {
	for _, p := range pages {
		if p {
			in++
		}
	}
	return in
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
	if in := count(resident(t, of, 4*mib, 8*mib)); in != 0 {
		t.Skipf("this file system keeps %d pages of a file that was asked to drop them", in)
	}
	f.(Advisor).WillNeed(4*mib, 8*mib)
	deadline := time.Now().Add(10 * time.Second)
	for {
		pages := resident(t, of, 4*mib, 8*mib)
		in := count(pages)
		if in == len(pages) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages of the range in memory 10s after WillNeed", in, len(pages))
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
