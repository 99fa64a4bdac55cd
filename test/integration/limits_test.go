package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestMaxFilesHoldsOverTheInstance checks that maxFiles bounds the files of
// the whole instance, not those of each server: three servers with
// --max-files=4 admit 2, 1 and 1 files of the names whose metadata server
// each is, their parts of the limit, whether creat(2) or mknod(2) makes
// them, and a refused create leaves nothing behind. The count survives a
// crash of a server, and removing a file makes room for another.
func TestMaxFilesHoldsOverTheInstance(t *testing.T) {
	requireFUSE(t)
	l := placement.Layout{Servers: 3, ExtentSize: 1 << 20}
	in := dirs(t)
	up(t, in, 3, "--server-arg=--max-files=4", "--server-arg=--commit-interval=1h")
	create := func(n string, i int) error {
		if i%2 == 1 {
			return unix.Mknod(filepath.Join(in.mount, n), unix.S_IFREG|0o644, 0)
		}
		return os.WriteFile(filepath.Join(in.mount, n), []byte(n), 0o644)
	}
	made := map[int][]string{}
	for server, want := range []int{2, 1, 1} {
		for i := range 3 {
			n := nameOn(l, fmt.Sprintf("s%d-%d-", server, i), server)
			err := create(n, i)
			switch {
			case err == nil:
				made[server] = append(made[server], n)
			case errors.Is(err, syscall.EDQUOT):
				if _, err := os.Lstat(filepath.Join(in.backing, n)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("refused create of %s left it on the backing directory: %v", n, err)
				}
			default:
				t.Errorf("create of %s: %v", n, err)
			}
		}
		if len(made[server]) != want {
			t.Errorf("server %d admitted %v, want %d files", server, made[server], want)
		}
	}
	killServer(t, in, 0)
	if err := create(nameOn(l, "after-crash-", 0), 0); !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("create past the limit after a crash of its server: %v, want EDQUOT", err)
	}
	if err := os.Remove(filepath.Join(in.mount, made[0][0])); err != nil {
		t.Fatal(err)
	}
	if err := create(nameOn(l, "after-remove-", 0), 1); err != nil {
		t.Errorf("create after a remove made room: %v", err)
	}
	must(t, "local", "down", "--mount", in.mount)
	if es, err := os.ReadDir(in.backing); err != nil || len(es) != 4 {
		t.Errorf("backing directory holds %d files (%v), want 4", len(es), err)
	}
}

// TestMaxFilesLetsOpenFilesBeWritten fills both servers' parts of
// maxFiles, then renames a file open for writing to a name of the other
// server, and unlinks another while open, as jobs do with temporary files:
// writes through the open files must land, as on a local file system,
// where the limit on files holds at creat and open, never at write.
func TestMaxFilesLetsOpenFilesBeWritten(t *testing.T) {
	requireFUSE(t)
	l := placement.Layout{Servers: 2, ExtentSize: 1 << 20}
	in := dirs(t)
	up(t, in, 2, "--server-arg=--max-files=4")
	names := map[int][]string{}
	for server := range 2 {
		for i := range 2 {
			n := nameOn(l, fmt.Sprintf("s%d-%d-", server, i), server)
			writeWhole(t, filepath.Join(in.mount, n), []byte(n))
			names[server] = append(names[server], n)
		}
	}
	if err := os.WriteFile(filepath.Join(in.mount, nameOn(l, "full-", 1)), nil, 0o644); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("create past the limit: %v, want EDQUOT", err)
	}
	data := randomBytes(3<<20, 7)
	renamed := nameOn(l, "renamed-", 1)
	f, err := os.OpenFile(filepath.Join(in.mount, names[0][0]), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(in.mount, names[0][0]), filepath.Join(in.mount, renamed)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Errorf("write to a file renamed while open: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("close of a file renamed while open: %v", err)
	}
	// The hidden name an unlinked file takes is random: try files of both
	// servers, so that one lands on a server whose part is used up.
	for _, n := range []string{names[0][1], names[1][0], names[1][1]} {
		f, err := os.OpenFile(filepath.Join(in.mount, n), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(in.mount, n)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Errorf("write to %s, unlinked while open: %v", n, err)
		}
		got := make([]byte, len(data))
		if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
			t.Errorf("read back from %s, unlinked while open: %v, equal %t", n, err, bytes.Equal(got, data))
		}
		if err := f.Close(); err != nil {
			t.Errorf("close of %s, unlinked while open: %v", n, err)
		}
	}
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, renamed), data)
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

// TestMaxFilesHoldsThroughFailedRenames fills both servers' parts of
// maxFiles with files of a user, who then tries to rename and link one into
// a directory it may not write: the calls fail, the file stays where it
// was, and so must its place under the limit, or failing renames would let
// a job create files past it. A rename that succeeds and a link, after
// which the file is not held by the cache or has two names, give the
// places back.
func TestMaxFilesHoldsThroughFailedRenames(t *testing.T) {
	requireFUSE(t)
	l := placement.Layout{Servers: 2, ExtentSize: 1 << 20}
	in := dirs(t)
	for _, d := range []string{filepath.Dir(in.backing), filepath.Dir(filepath.Dir(in.backing))} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	up(t, in, 2, "--server-arg=--max-files=2")
	mnt := func(p string) string { return filepath.Join(in.mount, p) }
	for _, d := range []string{"w", "ro"} {
		if err := os.Mkdir(mnt(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(mnt("w"), 0o777); err != nil {
		t.Fatal(err)
	}
	var mine [2]string
	for server := range 2 {
		mine[server] = nameOn(l, fmt.Sprintf("w/s%d-", server), server)
		if out, ok := asUser(1000, 1000, "sh", "-c", "echo x > "+mnt(mine[server])); !ok {
			t.Fatalf("create of %s: %s", mine[server], out)
		}
	}
	full := func(server int) error {
		return os.WriteFile(mnt(nameOn(l, fmt.Sprintf("full%d-", server), server)), nil, 0o644)
	}
	for server, n := range mine {
		for _, cmd := range []string{"mv", "ln"} {
			if out, ok := asUser(1000, 1000, cmd, mnt(n), mnt("ro/x")); ok || !strings.Contains(out, "ermission denied") {
				t.Fatalf("%s of %s into a directory the user may not write: %q, want permission denied", cmd, n, out)
			}
			if err := full(server); !errors.Is(err, syscall.EDQUOT) {
				t.Errorf("create on server %d after a failed %s of %s: %v, want EDQUOT", server, cmd, n, err)
			}
		}
	}
	if err := os.Rename(mnt(mine[0]), mnt("w/renamed")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(mnt(mine[1]), mnt("w/linked")); err != nil {
		t.Fatal(err)
	}
	for server := range 2 {
		if err := full(server); err != nil {
			t.Errorf("create on server %d after a rename and a link gave the places back: %v", server, err)
		}
	}
	must(t, "local", "down", "--mount", in.mount)
}
