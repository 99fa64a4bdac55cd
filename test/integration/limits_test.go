package integration

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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
