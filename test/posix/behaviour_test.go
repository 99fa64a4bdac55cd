package posix

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// nobody is an unprivileged client.
var nobody = ident.Cred{UID: 65534, GID: 65534, Groups: []uint32{65534}}

// both runs fn on a mount without and with the client cache.
func both(t *testing.T, fn func(t *testing.T, dir, backing string)) {
	for name, opts := range map[string][]mountOption{"no client cache": nil, "client cache": {withClientCache()}} {
		t.Run(name, func(t *testing.T) {
			dir, backing := mountUnderTest(t, opts...)
			fn(t, dir, backing)
		})
	}
}

func write(t *testing.T, name, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	// syscall.Chmod, since os.FileMode spells setuid, setgid and sticky
	// differently from the mode bits.
	if err := syscall.Chmod(name, uint32(mode)); err != nil {
		t.Fatal(err)
	}
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	var got syscall.Errno
	if !errors.As(err, &got) || got != want {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

// TestErrnos checks the errno of the common error cases, as the caller and
// as an unprivileged user.
func TestErrnos(t *testing.T) {
	dir, _ := mountUnderTest(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	write(t, p("file"), "x", 0o644)
	for _, d := range []string{"full/sub", "empty"} {
		if err := os.MkdirAll(p(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("loop", p("loop")); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		err  error
		want syscall.Errno
	}{
		"open a missing file":             {openErr(p("missing"), os.O_RDONLY), syscall.ENOENT},
		"open below a missing directory":  {openErr(p("missing/file"), os.O_RDONLY), syscall.ENOENT},
		"mkdir over a file":               {os.Mkdir(p("file"), 0o755), syscall.EEXIST},
		"exclusive create of a file":      {openErr(p("file"), os.O_CREATE|os.O_EXCL|os.O_WRONLY), syscall.EEXIST},
		"symlink over a file":             {os.Symlink("x", p("file")), syscall.EEXIST},
		"link over a file":                {os.Link(p("file"), p("file")), syscall.EEXIST},
		"path through a file":             {openErr(p("file/x"), os.O_RDONLY), syscall.ENOTDIR},
		"rmdir of a file":                 {syscall.Rmdir(p("file")), syscall.ENOTDIR},
		"open a directory for writing":    {openErr(p("empty"), os.O_WRONLY), syscall.EISDIR},
		"unlink a directory":              {syscall.Unlink(p("empty")), syscall.EISDIR},
		"rename a file over a directory":  {syscall.Rename(p("file"), p("empty")), syscall.EISDIR},
		"rename a directory over a file":  {syscall.Rename(p("empty"), p("file")), syscall.ENOTDIR},
		"rmdir of a full directory":       {syscall.Rmdir(p("full")), syscall.ENOTEMPTY},
		"rename over a full directory":    {syscall.Rename(p("empty"), p("full")), syscall.ENOTEMPTY},
		"rename into itself":              {syscall.Rename(p("full"), p("full/sub/x")), syscall.EINVAL},
		"symlink loop":                    {openErr(p("loop"), os.O_RDONLY), syscall.ELOOP},
		"name too long":                   {openErr(p(strings.Repeat("n", 256)), os.O_CREATE|os.O_WRONLY), syscall.ENAMETOOLONG},
		"rename to another file system":   {os.Rename(p("file"), filepath.Join(t.TempDir(), "file")), syscall.EXDEV},
		"link to another file system":     {os.Link(p("file"), filepath.Join(t.TempDir(), "file")), syscall.EXDEV},
		"readlink of a file":              {readlinkErr(p("file")), syscall.EINVAL},
		"getxattr of a missing attribute": {getxattrErr(p("file"), "user.missing"), syscall.ENODATA},
		"create as another user (EACCES)": {runAs(t, nobody, "create", p("denied")), syscall.EACCES},
		"write as another user (EACCES)":  {runAs(t, nobody, "write", p("file")), syscall.EACCES},
		"unlink as another user (EACCES)": {runAs(t, nobody, "unlink", p("file")), syscall.EACCES},
		"rename as another user (EACCES)": {runAs(t, nobody, "rename", p("file"), p("moved")), syscall.EACCES},
		"missing file as another user":    {runAs(t, nobody, "stat", p("missing")), syscall.ENOENT},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { wantErrno(t, name, tc.err, tc.want) })
	}
}

func openErr(name string, flag int) error {
	f, err := os.OpenFile(name, flag, 0o644)
	if err == nil {
		f.Close()
	}
	return err
}

func readlinkErr(name string) error {
	_, err := os.Readlink(name)
	return err
}

func getxattrErr(name, attr string) error {
	_, err := unix.Getxattr(name, attr, make([]byte, 16))
	return err
}

// TestRenameOverExisting checks that rename replaces the target atomically
// and that the replaced file's open descriptor keeps its data.
func TestRenameOverExisting(t *testing.T) {
	both(t, func(t *testing.T, dir, backing string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		write(t, a, "new contents", 0o600)
		write(t, b, "old", 0o644)
		old, err := os.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		if err := os.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(a); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("source still there after rename: %v", err)
		}
		fi, err := os.Stat(b)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("target after rename: %v, %v, want the source's mode 0600", fi, err)
		}
		if got, _ := os.ReadFile(b); string(got) != "new contents" {
			t.Errorf("target holds %q", got)
		}
		if got, _ := io.ReadAll(old); string(got) != "old" {
			t.Errorf("replaced file's descriptor reads %q, want old", got)
		}
		settleBacking(t, dir)
		if got, _ := os.ReadFile(filepath.Join(backing, "b")); string(got) != "new contents" {
			t.Errorf("backing holds %q", got)
		}
	})
}

// TestUnlinkOpenFile checks that an unlinked file stays readable and
// writable through its descriptors until the last close, and then leaves
// nothing behind.
func TestUnlinkOpenFile(t *testing.T) {
	both(t, func(t *testing.T, dir, backing string) {
		name := filepath.Join(dir, "f")
		write(t, name, "before", 0o644)
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("after!"), 0); err != nil {
			t.Fatalf("write after unlink: %v", err)
		}
		f.Sync()
		got := make([]byte, 6)
		if _, err := g.ReadAt(got, 0); err != nil || string(got) != "after!" {
			t.Errorf("second descriptor reads %q, %v after unlink", got, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 {
			t.Errorf("fstat after unlink: nlink %d, %v", st.Nlink, err)
		}
		if err := os.WriteFile(name, []byte("a new file"), 0o644); err != nil {
			t.Fatalf("creating the name again: %v", err)
		}
		if entries := names(t, dir); !cmp.Equal(entries, []string{"f"}) {
			t.Errorf("directory lists %v", entries)
		}
		f.Close()
		g.Close()
		waitFor(t, "the hidden name to go", func() bool { return cmp.Equal(names(t, backing), []string{"f"}) })
	})
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// waitFor polls cond for a few seconds: the kernel sends the release of a
// closed file after close(2) returns.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestTruncateOpenFile checks truncation of a file that is open elsewhere:
// both descriptors see the new size, and a write past it leaves zeros.
func TestTruncateOpenFile(t *testing.T) {
	both(t, func(t *testing.T, dir, _ string) {
		name := filepath.Join(dir, "f")
		write(t, name, "0123456789", 0o644)
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := os.Truncate(name, 4); err != nil {
			t.Fatal(err)
		}
		if fi, _ := f.Stat(); fi.Size() != 4 {
			t.Errorf("open descriptor sees size %d, want 4", fi.Size())
		}
		if err := f.Truncate(2); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("x"), 5); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(name); string(got) != "01\x00\x00\x00x" {
			t.Errorf("file holds %q after truncations and a write past the end", got)
		}
	})
}

// TestAppendTwoWriters checks that O_APPEND writes from two descriptors
// never overwrite each other.
func TestAppendTwoWriters(t *testing.T) {
	both(t, func(t *testing.T, dir, backing string) {
		name := filepath.Join(dir, "log")
		const writers, records = 2, 300
		var wg sync.WaitGroup
		for w := range writers {
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer f.Close()
				for i := range records {
					fmt.Fprintf(f, "writer %d record %03d\n", w, i)
				}
			}()
		}
		wg.Wait()
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		seen := map[string]bool{}
		for _, l := range lines {
			seen[l] = true
		}
		if len(lines) != writers*records || len(seen) != writers*records {
			t.Fatalf("%d lines, %d distinct, want %d: appends overwrote each other", len(lines), len(seen), writers*records)
		}
		settleBacking(t, dir)
		if b, _ := os.ReadFile(filepath.Join(backing, "log")); !bytes.Equal(b, got) {
			t.Errorf("backing file differs from what the mount reads: %d bytes, want %d", len(b), len(got))
		}
	})
}

// TestSharedMmap checks that writes through a shared writable mapping reach
// other descriptors and the backing file. A helper process maps the file:
// this one may serve the mount, and a process must not fault on a mount it
// serves (see mapWrite).
func TestSharedMmap(t *testing.T) {
	both(t, func(t *testing.T, dir, backing string) {
		name := filepath.Join(dir, "m")
		write(t, name, strings.Repeat(".", 8192), 0o644)
		// Open until the mount has been read back, so that the read sees
		// what msync wrote back rather than what the last close would.
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if e := runAs(t, ident.Cred{}, "map-write", name, "4096", "mapped"); e != 0 {
			t.Fatalf("writing through a shared mapping, then msync: %v", e)
		}
		want := strings.Repeat(".", 4096) + "mapped" + strings.Repeat(".", 4090)
		if got, _ := os.ReadFile(name); string(got) != want {
			t.Errorf("mount reads %d bytes, %q at 4096, after msync", len(got), around(got, 4096))
		}
		f.Close()
		settleBacking(t, dir)
		if got, _ := os.ReadFile(filepath.Join(backing, "m")); string(got) != want {
			t.Errorf("backing holds %d bytes, %q at 4096, after msync", len(got), around(got, 4096))
		}
	})
}

// around returns the bytes of b near off.
func around(b []byte, off int) []byte {
	return b[min(off, len(b)):min(off+10, len(b))]
}

// TestLocks checks POSIX and BSD locks between processes on the node.
func TestLocks(t *testing.T) {
	both(t, func(t *testing.T, dir, _ string) {
		name := filepath.Join(dir, "lock")
		write(t, name, "", 0o666)
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
			t.Fatal(err)
		}
		if e := runAs(t, nobody, "lock", name); e != syscall.EAGAIN {
			t.Errorf("POSIX lock held by another process: got %v, want EAGAIN", e)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		if e := runAs(t, nobody, "flock", name); e != syscall.EWOULDBLOCK {
			t.Errorf("BSD lock held by another process: got %v, want EWOULDBLOCK", e)
		}
		lk.Type = unix.F_UNLCK
		unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		if e := runAs(t, nobody, "lock", name); e != 0 {
			t.Errorf("POSIX lock after unlock: %v", e)
		}
	})
}

// TestXattrsSetElsewhereAreSeenAtOnce reads extended attributes through
// one mount, as ls -l does (lstat, then getxattr of each name on the
// path), while another mount and the backing directory set and remove
// them: each read answers what the file holds at the time, although the
// mount answers the absence of an attribute without a round trip when
// the lookup made for the read found it absent.
func TestXattrsSetElsewhereAreSeenAtOnce(t *testing.T) {
	a, backing := mountUnderTest(t)
	b, _ := mountUnderTest(t, sharing(backing))
	write(t, filepath.Join(a, "f"), "", 0o644)
	read := func() string {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(a, "f"), &st); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		n, err := unix.Lgetxattr(filepath.Join(a, "f"), "user.x", buf)
		if err != nil {
			return err.Error()
		}
		return string(buf[:n])
	}
	for i := range 3 {
		if got := read(); got != unix.ENODATA.Error() {
			t.Fatalf("user.x before it is set: %s, want ENODATA", got)
		}
		v := fmt.Sprint(i)
		if err := unix.Setxattr(filepath.Join(b, "f"), "user.x", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != v {
			t.Errorf("user.x set through another mount: %s, want %s", got, v)
		}
		if err := unix.Removexattr(filepath.Join(backing, "f"), "user.x"); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != unix.ENODATA.Error() {
			t.Errorf("user.x removed on the backing directory: %s, want ENODATA", got)
		}
		if err := unix.Setxattr(filepath.Join(backing, "f"), "user.x", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != v {
			t.Errorf("user.x set on the backing directory: %s, want %s", got, v)
		}
		if err := unix.Removexattr(filepath.Join(b, "f"), "user.x"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseToOpen checks that two mounts of the same files without client
// cache see each other's writes after close.
func TestCloseToOpen(t *testing.T) {
	a, backing := mountUnderTest(t)
	b, _ := mountUnderTest(t, sharing(backing))
	for i := range 3 {
		want := fmt.Sprintf("version %d", i)
		write(t, filepath.Join(a, "shared"), want, 0o644)
		if got, err := os.ReadFile(filepath.Join(b, "shared")); err != nil || string(got) != want {
			t.Fatalf("second mount reads %q, %v, want %q", got, err, want)
		}
	}
	if err := os.Rename(filepath.Join(b, "shared"), filepath.Join(b, "renamed")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a, "shared")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("first mount still sees the old name: %v", err)
	}
}
