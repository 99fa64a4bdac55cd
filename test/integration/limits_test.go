package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/placement"
)

// TestMaxFileSizeChangesNothingItRefuses checks, on a file striped over
// three servers, that a change past the limit on file size either fails
// with EFBIG and leaves the file as it was, on the mount and on the
// backing directory after down, or, for a write that crosses the limit at
// an extent another server holds, ends short of the limit as write(2)
// does on a local file system: never EFBIG over bytes that landed.
func TestMaxFileSizeChangesNothingItRefuses(t *testing.T) {
	requireFUSE(t)
	const limit = 3 << 20
	in := dirs(t)
	up(t, in, 3, "--server-arg=--max-file-size=3Mi")
	head := randomBytes(limit-10, 4)
	for _, n := range []string{"append", "truncate", "ftruncate", "fallocate", "pwrite"} {
		writeWhole(t, filepath.Join(in.mount, n), head)
	}
	if n, err := appendTo(filepath.Join(in.mount, "append"), bytes.Repeat([]byte("y"), 100)); n != 10 || err != nil {
		t.Errorf("append of 100 bytes 10 short of the limit: %d, %v; want 10, nil", n, err)
	}
	refused := map[string]func(f *os.File) error{
		"truncate":  func(f *os.File) error { return os.Truncate(f.Name(), limit+1) },
		"ftruncate": func(f *os.File) error { return f.Truncate(limit + 1) },
		"fallocate": func(f *os.File) error { return unix.Fallocate(int(f.Fd()), 0, 0, limit+1) },
		"pwrite":    func(f *os.File) error { _, err := f.WriteAt([]byte("far"), 1<<40); return err },
	}
	for n, change := range refused {
		f, err := os.OpenFile(filepath.Join(in.mount, n), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := change(f); !errors.Is(err, syscall.EFBIG) {
			t.Errorf("%s past the limit: %v, want EFBIG", n, err)
		}
		f.Close()
		sameSizedFile(t, filepath.Join(in.mount, n), head)
	}
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "append"), append(head, bytes.Repeat([]byte("y"), 10)...))
	for n := range refused {
		sameSizedFile(t, filepath.Join(in.backing, n), head)
	}
}

// appendTo writes data to the end of path through O_APPEND, once, and
// returns what write(2) answered.
func appendTo(path string, data []byte) (int, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return unix.Write(int(f.Fd()), data)
}

// sameSizedFile fails the test unless path holds want, and reads it only if
// it has the size of want: a file grown past a limit may be huge.
func sameSizedFile(t *testing.T, path string, want []byte) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Errorf("stat %s: %v", path, err)
		return
	}
	if st.Size() != int64(len(want)) {
		t.Errorf("%s: %d bytes, want %d", path, st.Size(), len(want))
		return
	}
	sameFile(t, path, want)
}

// TestMaxFilesChangesNothingItRefuses checks, on three servers that each
// hold at most two files, writes that a server refuses with EDQUOT: a
// write whose first extent's server takes it and whose second extent's
// server is full ends short at the extent boundary, as write(2) does at a
// limit, rather than fail over bytes that landed; and a write that failed
// leaves no size behind, which the metadata server had shown every client
// until then, with zeros up to it.
func TestMaxFilesChangesNothingItRefuses(t *testing.T) {
	requireFUSE(t)
	const extent = 1 << 20
	l := placement.Layout{Servers: 3, ExtentSize: extent}
	in := dirs(t)
	straddled := nameOn(l, "straddled", 0)
	// The second extent of straddled, and the sixth of far, are on server 1.
	far := nameOn(l, "far", 2)
	for _, n := range []string{straddled, far} {
		writeWhole(t, filepath.Join(in.backing, n), make([]byte, 2*extent))
	}
	up(t, in, 3, "--server-arg=--max-files=2")
	for i := range 2 {
		writeWhole(t, filepath.Join(in.mount, nameOn(l, fmt.Sprintf("small%d", i), 1)), []byte("fills server 1"))
	}
	f, err := os.OpenFile(filepath.Join(in.mount, straddled), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := unix.Pwrite(int(f.Fd()), bytes.Repeat([]byte("w"), extent/2), extent*3/4); n != extent/4 || err != nil {
		t.Errorf("write over the extent boundary into a full server: %d, %v; want %d, nil", n, err, extent/4)
	}
	g, err := os.OpenFile(filepath.Join(in.mount, far), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.WriteAt([]byte("far"), 5*extent); !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("write past the end into a full server: %v, want EDQUOT", err)
	}
	if st, err := os.Stat(filepath.Join(in.mount, far)); err != nil || st.Size() != 2*extent {
		t.Errorf("size after a refused write: %v, %v; want %d", sizeOf(st), err, 2*extent)
	}
	f.Close()
	g.Close()
	must(t, "local", "down", "--mount", in.mount)
	want := make([]byte, 2*extent)
	copy(want[extent*3/4:extent], bytes.Repeat([]byte("w"), extent/4))
	sameSizedFile(t, filepath.Join(in.backing, straddled), want)
	sameSizedFile(t, filepath.Join(in.backing, far), make([]byte, 2*extent))
}

// nameOn returns the first name made of prefix and a number whose
// metadata server, which holds its first extent, is server.
func nameOn(l placement.Layout, prefix string, server int) string {
	for i := 0; ; i++ {
		if n := fmt.Sprintf("%s%d", prefix, i); l.MetaServer(n) == server {
			return n
		}
	}
}

// sizeOf returns the size in st, or -1 without one.
func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// TestMaxFileSizeLetsAFilePastItShrink checks that a file written on the
// backing directory past the limit on file size may shrink through the
// mount, to a size still past the limit or below it, as the kernel lets a
// process past RLIMIT_FSIZE shrink a local file, while growing it stays
// refused with EFBIG.
func TestMaxFileSizeLetsAFilePastItShrink(t *testing.T) {
	requireFUSE(t)
	const limit = 3 << 20
	in := dirs(t)
	big := randomBytes(5<<20, 7)
	for _, n := range []string{"truncate", "ftruncate"} {
		writeWhole(t, filepath.Join(in.backing, n), big)
	}
	up(t, in, 3, "--server-arg=--max-file-size=3Mi")
	cut := map[string]func(path string, size int64) error{
		"truncate": os.Truncate,
		"ftruncate": func(path string, size int64) error {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(size)
		},
	}
	for n, change := range cut {
		p := filepath.Join(in.mount, n)
		if err := change(p, 4<<20); err != nil {
			t.Errorf("%s of a file past the limit to a size past it: %v", n, err)
		}
		if err := change(p, 4<<20+1); !errors.Is(err, syscall.EFBIG) {
			t.Errorf("%s growing a file past the limit: %v, want EFBIG", n, err)
		}
		if err := change(p, limit-1); err != nil {
			t.Errorf("%s of a file past the limit to a size below it: %v", n, err)
		}
		sameSizedFile(t, p, big[:limit-1])
	}
	must(t, "local", "down", "--mount", in.mount)
	for n := range cut {
		sameSizedFile(t, filepath.Join(in.backing, n), big[:limit-1])
	}
}
