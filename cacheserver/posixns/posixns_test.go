package posixns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// nobody is an unprivileged identity for the tests that need the kernel's
// permission checks; they need root to switch to it.
var nobody = ident.Cred{UID: 65534, GID: 65534, Groups: []uint32{65534}}

// newFS returns a namespace over a fresh directory that every identity can
// traverse, and the directory.
func newFS(t *testing.T) (*FS, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "posixns-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fsys, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys, dir
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching identities needs root")
	}
}

func asNobody() context.Context { return ident.NewContext(context.Background(), nobody) }

func mustWrite(t *testing.T, name, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	// syscall.Chmod, since os.FileMode spells the setuid, setgid and sticky
	// bits differently from the mode bits.
	if err := syscall.Chmod(name, uint32(mode)); err != nil {
		t.Fatal(err)
	}
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := namespace.Errno(err); got != want {
		t.Fatalf("%s: error %v (errno %d), want %v", what, err, got, want)
	}
}

func TestErrors(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := context.Background()
	mustWrite(t, filepath.Join(dir, "d/f"), "x", 0o644)
	mustWrite(t, filepath.Join(dir, "f"), "x", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		op   func() error
		want syscall.Errno
	}{
		"getattr of a missing file":      {func() error { _, err := fsys.GetAttr(ctx, "nope"); return err }, syscall.ENOENT},
		"getattr below a file":           {func() error { _, err := fsys.GetAttr(ctx, "f/x"); return err }, syscall.ENOTDIR},
		"mkdir over a file":              {func() error { _, err := fsys.Mkdir(ctx, "f", 0o755); return err }, syscall.EEXIST},
		"exclusive create of a file":     {func() error { _, err := fsys.Create(ctx, "f", os.O_RDWR|os.O_EXCL, 0o644); return err }, syscall.EEXIST},
		"rmdir of a full directory":      {func() error { return fsys.Rmdir(ctx, "d") }, syscall.ENOTEMPTY},
		"rmdir of a file":                {func() error { return fsys.Rmdir(ctx, "f") }, syscall.ENOTDIR},
		"unlink of a directory":          {func() error { return fsys.Unlink(ctx, "empty") }, syscall.EISDIR},
		"open of a directory to write":   {func() error { _, err := fsys.Open(ctx, "d", os.O_WRONLY); return err }, syscall.EISDIR},
		"rename a directory over a file": {func() error { return fsys.Rename(ctx, "empty", "f", 0) }, syscall.ENOTDIR},
		"rename without replace":         {func() error { return fsys.Rename(ctx, "f", "d/f", 1) }, syscall.EEXIST},
		"readlink of a file":             {func() error { _, err := fsys.Readlink(ctx, "f"); return err }, syscall.EINVAL},
		"readlink with attrs of a file":  {func() error { _, _, err := fsys.ReadlinkAttr(ctx, "f"); return err }, syscall.EINVAL},
		"absolute path":                  {func() error { _, err := fsys.GetAttr(ctx, "/f"); return err }, syscall.EINVAL},
		"path that climbs":               {func() error { _, err := fsys.GetAttr(ctx, "../f"); return err }, syscall.EINVAL},
		"readdir of a file":              {func() error { _, err := fsys.ReadDir(ctx, "f"); return err }, syscall.ENOTDIR},
		"read of a missing file":         {func() error { _, err := fsys.ReadAt(ctx, "nope", make([]byte, 1), 0); return err }, syscall.ENOENT},
		"xattr that does not exist":      {func() error { _, err := fsys.Getxattr(ctx, "f", "user.nope", nil); return err }, syscall.ENODATA},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { wantErrno(t, name, tc.op(), tc.want) })
	}
}

// TestBeneath proves that no operation follows a symbolic link out of the
// root, whether it is absolute or climbs with "..".
func TestBeneath(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := context.Background()
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "secret"), "secret", 0o644)
	for _, target := range []string{outside, "../" + filepath.Base(outside), "../../../../../../" + outside} {
		os.Remove(filepath.Join(dir, "out"))
		if err := os.Symlink(target, filepath.Join(dir, "out")); err != nil {
			t.Fatal(err)
		}
		escapes := map[string]func() error{
			"getattr": func() error { _, err := fsys.GetAttr(ctx, "out/secret"); return err },
			"readdir": func() error { _, err := fsys.ReadDir(ctx, "out"); return err },
			"read":    func() error { _, err := fsys.ReadAt(ctx, "out/secret", make([]byte, 6), 0); return err },
			"write":   func() error { _, err := fsys.WriteAt(ctx, "out/secret", []byte("x"), 0); return err },
			"create":  func() error { _, err := fsys.Create(ctx, "out/new", os.O_RDWR, 0o644); return err },
			"unlink":  func() error { return fsys.Unlink(ctx, "out/secret") },
			"chmod": func() error {
				m := uint32(0o777)
				_, err := fsys.SetAttr(ctx, "out/secret", namespace.SetAttr{Mode: &m})
				return err
			},
			"setxattr": func() error { return fsys.Setxattr(ctx, "out/secret", "user.x", []byte("1"), 0) },
			"rename":   func() error { return fsys.Rename(ctx, "out/secret", "stolen", 0) },
		}
		for name, op := range escapes {
			if err := op(); err == nil {
				t.Errorf("%s through a link to %s succeeded", name, target)
			}
		}
		// The link itself is an ordinary name in the tree.
		if got, err := fsys.Readlink(ctx, "out"); err != nil || got != target {
			t.Errorf("Readlink(out) = %q, %v, want %q", got, err, target)
		}
		got, a, err := fsys.ReadlinkAttr(ctx, "out")
		want, _ := fsys.GetAttr(ctx, "out")
		// Reading a link sets its access time.
		want.Atime = a.Atime
		if err != nil || got != target || a != want {
			t.Errorf("ReadlinkAttr(out) = %q, %+v, %v; want %q, %+v", got, a, err, target, want)
		}
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 1 {
		t.Fatalf("outside directory changed: %v, %v", entries, err)
	}
	if fi, _ := os.Stat(filepath.Join(outside, "secret")); fi.Mode().Perm() != 0o644 || fi.Size() != 6 {
		t.Fatalf("outside file changed: %v %d", fi.Mode(), fi.Size())
	}
}

func TestInTreeLinkIsFollowed(t *testing.T) {
	fsys, dir := newFS(t)
	mustWrite(t, filepath.Join(dir, "real/f"), "data", 0o644)
	if err := os.Symlink("real", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if n, err := fsys.ReadAt(context.Background(), "alias/f", buf, 0); err != nil || string(buf[:n]) != "data" {
		t.Fatalf("ReadAt(alias/f) = %q, %v", buf[:n], err)
	}
}

func TestMetadata(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := context.Background()
	a, err := fsys.Mkdir(ctx, "d", 0o777)
	if err != nil || a.Mode != syscall.S_IFDIR|0o777 {
		t.Fatalf("Mkdir = %o, %v: want mode %o despite the umask", a.Mode, err, syscall.S_IFDIR|0o777)
	}
	if _, err := fsys.Create(ctx, "d/f", os.O_RDWR, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Symlink(ctx, "f", "d/l"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Link(ctx, "d/f", "d/h"); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Mknod(ctx, "d/p", syscall.S_IFIFO|0o600, 0); err != nil {
		t.Fatal(err)
	}
	entries, err := fsys.ReadDir(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	for _, e := range entries {
		got[e.Name] = e.Mode
	}
	want := map[string]uint32{"f": syscall.S_IFREG, "l": syscall.S_IFLNK, "h": syscall.S_IFREG, "p": syscall.S_IFIFO}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ReadDir (-want +got):\n%s", d)
	}
	fa, _ := fsys.GetAttr(ctx, "d/f")
	if fa.Nlink != 2 || fa.Mode != syscall.S_IFREG|0o666 {
		t.Fatalf("GetAttr(d/f) = nlink %d mode %o", fa.Nlink, fa.Mode)
	}
	la, _ := fsys.GetAttr(ctx, "d/l")
	if la.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		t.Fatalf("GetAttr followed the link: mode %o", la.Mode)
	}
	if err := fsys.Rename(ctx, "d/f", "d/h", 0); err != nil {
		t.Fatalf("rename of a hard link over itself: %v", err)
	}
	if err := fsys.Rename(ctx, "d/l", "d/p", 2); err != nil {
		t.Fatalf("RENAME_EXCHANGE: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "d/p")); err != nil || target != "f" {
		t.Fatalf("after exchange d/p -> %q, %v", target, err)
	}
}

func TestSetAttr(t *testing.T) {
	fsys, _ := newFS(t)
	ctx := context.Background()
	if _, err := fsys.Create(ctx, "f", os.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	mode, size, uid := uint32(0o600), int64(12345), uint32(4242)
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	in := namespace.SetAttr{Mode: &mode, Size: &size, Mtime: &mtime, AtimeNow: true}
	if os.Geteuid() == 0 {
		in.UID = &uid
	}
	a, err := fsys.SetAttr(ctx, "f", in)
	if err != nil {
		t.Fatal(err)
	}
	if a.Mode != syscall.S_IFREG|0o600 || a.Size != size || !a.Mtime.Equal(mtime) || time.Since(a.Atime) > time.Minute {
		t.Fatalf("SetAttr gave mode %o size %d mtime %v atime %v", a.Mode, a.Size, a.Mtime, a.Atime)
	}
	if in.UID != nil && a.UID != uid {
		t.Fatalf("SetAttr gave uid %d, want %d", a.UID, uid)
	}
}

// TestSetAttrTimesPast2262 sets a time that nanoseconds since the epoch in
// an int64 cannot hold, which the backing file system can.
func TestSetAttrTimesPast2262(t *testing.T) {
	fsys, _ := newFS(t)
	ctx := context.Background()
	if _, err := fsys.Create(ctx, "f", os.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2400, 1, 2, 3, 4, 5, 6, time.UTC)
	a, err := fsys.SetAttr(ctx, "f", namespace.SetAttr{Mtime: &mtime})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Mtime.Equal(mtime) {
		t.Fatalf("SetAttr gave mtime %v, want %v", a.Mtime, mtime)
	}
}

func TestData(t *testing.T) {
	fsys, _ := newFS(t)
	ctx := context.Background()
	if _, err := fsys.Create(ctx, "f", os.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := fsys.WriteAt(ctx, "f", []byte("hello world"), 3); err != nil || n != 11 {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	buf := make([]byte, 20)
	n, err := fsys.ReadAt(ctx, "f", buf, 0)
	if !errors.Is(err, io.EOF) || n != 14 || string(buf[3:n]) != "hello world" || buf[0] != 0 {
		t.Fatalf("ReadAt = %q, %v, want a hole and hello world with io.EOF", buf[:n], err)
	}
	if n, err := fsys.ReadAt(ctx, "f", buf[:5], 3); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("ReadAt inside the file = %q, %v", buf[:n], err)
	}
	if err := fsys.Fsync(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if a, err := fsys.Open(ctx, "f", os.O_WRONLY|os.O_TRUNC); err != nil || a.Size != 0 {
		t.Fatalf("Open(O_TRUNC) = size %d, %v", a.Size, err)
	}
	st, err := fsys.StatFS(ctx)
	if err != nil || st.Blocks == 0 || st.Bsize == 0 || st.NameLen == 0 {
		t.Fatalf("StatFS = %+v, %v", st, err)
	}
}

func TestXattr(t *testing.T) {
	fsys, _ := newFS(t)
	ctx := context.Background()
	if _, err := fsys.Create(ctx, "f", os.O_RDWR, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Setxattr(ctx, "f", "user.k", []byte("value"), 0); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "XATTR_CREATE of an existing name", fsys.Setxattr(ctx, "f", "user.k", []byte("v"), 1), syscall.EEXIST)
	if n, err := fsys.Getxattr(ctx, "f", "user.k", nil); err != nil || n != 5 {
		t.Fatalf("Getxattr size = %d, %v", n, err)
	}
	buf := make([]byte, 64)
	if n, err := fsys.Getxattr(ctx, "f", "user.k", buf); err != nil || string(buf[:n]) != "value" {
		t.Fatalf("Getxattr = %q, %v", buf[:n], err)
	}
	if n, err := fsys.Listxattr(ctx, "f", buf); err != nil || string(buf[:n]) != "user.k\x00" {
		t.Fatalf("Listxattr = %q, %v", buf[:n], err)
	}
	if err := fsys.Removexattr(ctx, "f", "user.k"); err != nil {
		t.Fatal(err)
	}
	_, err := fsys.Getxattr(ctx, "f", "user.k", buf)
	wantErrno(t, "Getxattr after remove", err, syscall.ENODATA)
}

// TestOpenOwnedChecksTheFileSystem: a file opened with the server's
// identity, for an owner whose own open was refused, must be the file the
// owner was checked against. Inode numbers repeat across the file systems
// mounted beneath the root, so the device must match too.
func TestOpenOwnedChecksTheFileSystem(t *testing.T) {
	fsys, dir := newFS(t)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := fsys.usableBy(context.Background(), "f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := fsys.openOwned("f", syscall.O_RDONLY, id)
	if err != nil {
		t.Fatalf("openOwned of the file checked: %v", err)
	}
	syscall.Close(fd)
	other := fileID{dev: id.dev + 1, ino: id.ino}
	if fd, err := fsys.openOwned("f", syscall.O_RDONLY, other); !errors.Is(err, syscall.EACCES) {
		syscall.Close(fd)
		t.Fatalf("openOwned of the same inode number on another device: %v, want EACCES", err)
	}
}

// TestReadDirPageListsStayingEntriesOnce lists a directory a few entries
// at a time while names are added and removed between the pages: every
// entry that stays throughout is listed, and none twice.
func TestReadDirPageListsStayingEntriesOnce(t *testing.T) {
	fsys, dir := newFS(t)
	ctx := context.Background()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 500
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, "d", fmt.Sprintf("s%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "d", fmt.Sprintf("gone%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	pages := 0
	for cookie, done := uint64(0), false; !done; pages++ {
		var es []namespace.DirEntry
		var err error
		es, cookie, done, err = fsys.ReadDirPage(ctx, "d", cookie, 20*(8+namespace.DirEntrySize))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			seen[e.Name]++
		}
		if err := os.Remove(filepath.Join(dir, "d", fmt.Sprintf("gone%d", pages))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "d", fmt.Sprintf("new%d", pages)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if pages < 10 {
		t.Errorf("%d entries came in %d pages of about 20, want more", 2*files, pages)
	}
	for i := range files {
		if n := seen[fmt.Sprintf("s%d", i)]; n != 1 {
			t.Errorf("s%d listed %d times, want once", i, n)
		}
	}
	for name, n := range seen {
		if n > 1 {
			t.Errorf("%s listed %d times", name, n)
		}
	}
}

// mountBeneath mounts a fresh tmpfs at dir/name, holding the file f, and
// unmounts it when the test ends; it skips the test where mounting is not
// allowed.
func mountBeneath(t *testing.T, dir, name string) {
	t.Helper()
	at := filepath.Join(dir, name)
	if err := os.Mkdir(at, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", at, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(at, syscall.MNT_DETACH) })
	mustWrite(t, filepath.Join(at, "f"), "other file system", 0o644)
}

// TestMountsBeneathTheRootAreNotCrossed: a file system mounted beneath the
// root numbers its inodes anew, and a bind mount may show a directory
// above itself; neither its mount point nor anything under it is served,
// so that no file of it is taken for the file of the root's file system
// with the same inode number.
func TestMountsBeneathTheRootAreNotCrossed(t *testing.T) {
	fsys, dir := newFS(t)
	mountBeneath(t, dir, "mnt")
	mustWrite(t, filepath.Join(dir, "sub", "f"), "root file system", 0o644)
	loop := filepath.Join(dir, "sub", "loop")
	if err := os.Mkdir(loop, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(dir, loop, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(loop, syscall.MNT_DETACH) })
	ctx := context.Background()
	for _, p := range []string{"mnt", "mnt/f", "sub/loop", "sub/loop/sub/f"} {
		_, err := fsys.GetAttr(ctx, p)
		wantErrno(t, "GetAttr "+p, err, syscall.EXDEV)
		_, err = fsys.Open(ctx, p, syscall.O_RDONLY)
		wantErrno(t, "Open "+p, err, syscall.EXDEV)
	}
	_, err := fsys.ReadDir(ctx, "mnt")
	wantErrno(t, "ReadDir mnt", err, syscall.EXDEV)
	_, err = fsys.Create(ctx, "mnt/new", syscall.O_WRONLY, 0o644)
	wantErrno(t, "Create mnt/new", err, syscall.EXDEV)
	if _, err := fsys.GetAttr(ctx, "sub/f"); err != nil {
		t.Fatalf("a file of the root's file system: %v", err)
	}
	entries, err := fsys.ReadDir(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(entries, func(e namespace.DirEntry) bool { return e.Name == "mnt" }) {
		t.Fatalf("the mount point is not listed: %v", entries)
	}
}
