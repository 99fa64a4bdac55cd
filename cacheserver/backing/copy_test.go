package backing

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// openDst creates a file of n bytes of 0xee in dir, to copy into.
func openDst(t *testing.T, dir string, n int) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "dst"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xee}, n), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// otherFS returns a directory on another file system than dir (tmpfs), or
// skips the test.
func otherFS(t *testing.T, dir string) string {
	t.Helper()
	var a, b unix.Stat_t
	shm, err := os.MkdirTemp("/dev/shm", "backing-test-")
	if err != nil {
		t.Skip("no /dev/shm")
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	if unix.Stat(dir, &a) != nil || unix.Stat(shm, &b) != nil || a.Dev == b.Dev {
		t.Skip("/dev/shm is on the file system of the test directory")
	}
	return shm
}

// TestCopyRangeFollowsItsContract copies ranges of a sparse file, within one
// file system and across two: holes arrive as zeros, a copy stops at the
// end of the file with a short count, and bytes of the destination past
// what was copied stay as they were.
func TestCopyRangeFollowsItsContract(t *testing.T) {
	root := t.TempDir()
	d := NewDir(root)
	ctx := context.Background()
	head, tail := bytes.Repeat([]byte("head"), 1<<14), bytes.Repeat([]byte("tail"), 1000)
	const tailAt = 1 << 20 // a hole of 960 KiB before the tail
	if _, err := d.WriteAt(ctx, "f", head, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteAt(ctx, "f", tail, tailAt); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, tailAt+len(tail))
	copy(want, head)
	copy(want[tailAt:], tail)
	src, err := os.Open(filepath.Join(root, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	copiers := map[string]func(off int64, dst int, dstOff, n int64) (int64, error){
		"CopyRange": func(off int64, dst int, dstOff, n int64) (int64, error) {
			return d.CopyRange(ctx, "f", off, dst, dstOff, n)
		},
		// As CopyRange copies from a FUSE file.
		"through a buffer": func(off int64, dst int, dstOff, n int64) (int64, error) {
			return copyPath("f", readCopier, int(src.Fd()), off, dst, dstOff, n)
		},
	}
	for name, dstDir := range map[string]string{"same file system": t.TempDir(), "other file system": otherFS(t, root)} {
		for _, tc := range []struct{ off, n int64 }{
			{0, int64(len(want))},
			{100, 2 << 20},                  // past the end: short
			{int64(len(want)) + 5, 1 << 20}, // wholly past the end: nothing
		} {
			for how, copyRange := range copiers {
				const dstOff = 4096
				dst := openDst(t, dstDir, dstOff+int(tc.n))
				got, err := copyRange(tc.off, int(dst.Fd()), dstOff, tc.n)
				wantN := max(min(tc.n, int64(len(want))-tc.off), 0)
				if err != nil || got != wantN {
					t.Fatalf("%s, %s: copy(off %d, n %d) = %d, %v; want %d", name, how, tc.off, tc.n, got, err, wantN)
				}
				b := make([]byte, dstOff+tc.n)
				if _, err := dst.ReadAt(b, 0); err != nil {
					t.Fatal(err)
				}
				wantDst := bytes.Repeat([]byte{0xee}, len(b))
				from := min(tc.off, int64(len(want)))
				copy(wantDst[dstOff:], want[from:from+wantN])
				if i := firstDiff(b, wantDst); i >= 0 {
					t.Fatalf("%s, %s: copy(off %d, n %d): destination differs at %d", name, how, tc.off, tc.n, i)
				}
			}
		}
	}
	dst := openDst(t, t.TempDir(), 1)
	if _, err := d.CopyRange(ctx, "missing", 0, int(dst.Fd()), 0, 1); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CopyRange of a missing file: %v, want not exist", err)
	}
}

// TestCopyRangesCopiesThroughOneOpen copies a file in ranges, out of order
// and one past its end, through one CopyFunc: each copy keeps CopyRange's
// contract. A missing file fails before fn runs, and Faulty counts and cuts
// short each copy.
func TestCopyRangesCopiesThroughOneOpen(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	if err := os.WriteFile(filepath.Join(root, "f"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	const chunk = 100 << 10
	dst := openDst(t, t.TempDir(), len(data)+chunk)
	var copies []int64
	err := NewDir(root).CopyRanges(ctx, "f", func(cp CopyFunc, readsAhead bool) error {
		if !readsAhead {
			t.Error("CopyRanges says the kernel does not read a local file ahead")
		}
		for _, off := range []int64{chunk, 0, 2 * chunk, 3 * chunk} {
			n, err := cp(off, int(dst.Fd()), off, chunk)
			if err != nil {
				return err
			}
			copies = append(copies, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{chunk, chunk, int64(len(data)) - 2*chunk, 0}; !slices.Equal(copies, want) {
		t.Fatalf("copied %v, want %v", copies, want)
	}
	got := make([]byte, len(data)+chunk)
	if _, err := dst.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	wantDst := append(slices.Clone(data), bytes.Repeat([]byte{0xee}, chunk)...)
	if i := firstDiff(got, wantDst); i >= 0 {
		t.Fatalf("destination differs at %d", i)
	}

	called := false
	err = NewDir(root).CopyRanges(ctx, "missing", func(CopyFunc, bool) error { called = true; return nil })
	if !errors.Is(err, fs.ErrNotExist) || called {
		t.Fatalf("CopyRanges of a missing file: %v, fn called %v; want not exist, not called", err, called)
	}

	f := NewFaulty(NewDir(root))
	injected := errors.New("injected")
	err = f.CopyRanges(ctx, "f", func(cp CopyFunc, _ bool) error {
		if n, err := cp(0, int(dst.Fd()), 0, chunk); n != chunk || err != nil {
			t.Errorf("first copy through Faulty = %d, %v", n, err)
		}
		f.SetError(OpCopyRange, injected)
		n, err := cp(0, int(dst.Fd()), 0, chunk)
		if n != chunk/2 {
			t.Errorf("copy with a fault copied %d, want %d", n, chunk/2)
		}
		return err
	})
	if !errors.Is(err, injected) || f.Calls(OpCopyRange) != 2 {
		t.Fatalf("CopyRanges with a fault: %v after %d copies; want the fault after 2", err, f.Calls(OpCopyRange))
	}
	hidden := NewFaulty(struct{ Store }{NewDir(root)})
	if err := hidden.CopyRanges(ctx, "f", func(CopyFunc, bool) error { return nil }); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("CopyRanges over a Store that cannot copy: %v, want ErrUnsupported", err)
	}
}

// TestFaultyForwardsCopyRange checks that Faulty copies through a Store
// that can, refuses for one that cannot, and fails halfway when told to.
func TestFaultyForwardsCopyRange(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 256)
	if err := os.WriteFile(filepath.Join(root, "f"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewFaulty(NewDir(root))
	dst := openDst(t, t.TempDir(), len(data))
	if n, err := f.CopyRange(ctx, "f", 0, int(dst.Fd()), 0, int64(len(data))); n != int64(len(data)) || err != nil {
		t.Fatalf("CopyRange = %d, %v", n, err)
	}
	injected := errors.New("injected")
	f.SetError(OpCopyRange, injected)
	dst = openDst(t, t.TempDir(), len(data))
	n, err := f.CopyRange(ctx, "f", 0, int(dst.Fd()), 0, int64(len(data)))
	if n != int64(len(data)/2) || !errors.Is(err, injected) {
		t.Fatalf("CopyRange with a fault = %d, %v; want half, the fault", n, err)
	}
	if f.Calls(OpCopyRange) != 2 {
		t.Fatalf("calls = %d, want 2", f.Calls(OpCopyRange))
	}
	hidden := NewFaulty(struct{ Store }{NewDir(root)})
	if _, err := hidden.CopyRange(ctx, "f", 0, int(dst.Fd()), 0, 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("CopyRange over a Store that cannot copy: %v, want ErrUnsupported", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
