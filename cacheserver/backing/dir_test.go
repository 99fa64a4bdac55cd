package backing

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

func TestDirWritesCreateParentsAndStaySparse(t *testing.T) {
	root := t.TempDir()
	d := NewDir(root)
	ctx := context.Background()
	if _, err := d.WriteAt(ctx, "a/b/c", []byte("tail"), 64<<20); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, "a/b/c"))
	if err != nil || fi.Size() != 64<<20+4 {
		t.Fatalf("size %v, %v", fi, err)
	}
	if blocks := fi.Sys().(*syscall.Stat_t).Blocks; blocks*512 > 1<<20 {
		t.Fatalf("file of 64 MiB written at its end uses %d bytes: not sparse", blocks*512)
	}
	b := make([]byte, 10)
	n, err := d.ReadAt(ctx, "a/b/c", b, 64<<20)
	if n != 4 || !errors.Is(err, io.EOF) || string(b[:4]) != "tail" {
		t.Fatalf("read %q, %v", b[:n], err)
	}
	if n, err := ReadFull(ctx, d, "missing", b, 0); n != 0 || err != nil {
		t.Fatalf("ReadFull of a missing file: %d, %v", n, err)
	}
	if err := d.Truncate(ctx, "x/new", 100); err != nil {
		t.Fatal(err)
	}
	if fi, err := d.Stat(ctx, "x/new"); err != nil || fi.Size() != 100 {
		t.Fatalf("truncate created %v, %v", fi, err)
	}
}

func TestDirRunsAsTheCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching identities needs root")
	}
	root := t.TempDir()
	os.Chmod(filepath.Dir(root), 0o755)
	os.Chmod(root, 0o755)
	d := NewDir(root)
	if _, err := d.WriteAt(context.Background(), "private/f", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(root, "private"), 0o700)
	ctx := ident.NewContext(context.Background(), ident.Cred{UID: 2000, GID: 2000})
	for name, op := range map[string]func() error{
		"read":  func() error { _, err := d.ReadAt(ctx, "private/f", make([]byte, 1), 0); return err },
		"write": func() error { _, err := d.WriteAt(ctx, "private/f", []byte("y"), 0); return err },
		"stat":  func() error { _, err := d.Stat(ctx, "private/f"); return err },
		"copy": func() error {
			dst := openDst(t, t.TempDir(), 1)
			_, err := d.CopyRange(ctx, "private/f", 0, int(dst.Fd()), 0, 1)
			return err
		},
	} {
		if err := op(); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("%s as 2000: %v, want permission denied", name, err)
		}
	}
}

// TestFileIDTellsACreatedAgainFileApart: a file created under the name of
// one just removed is another file, even when the file system gives it
// the same inode number; the same file keeps its identity across writes.
func TestFileIDTellsACreatedAgainFileApart(t *testing.T) {
	root := t.TempDir()
	d := NewDir(root)
	ctx := context.Background()
	path := filepath.Join(root, "f")
	if err := os.WriteFile(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := d.FileID(ctx, "f")
	if err != nil || first.Ino == 0 {
		t.Fatalf("FileID = %+v, %v", first, err)
	}
	if _, err := d.WriteAt(ctx, "f", []byte("more"), 3); err != nil {
		t.Fatal(err)
	}
	if same, err := d.FileID(ctx, "f"); err != nil || first.Other(same) {
		t.Fatalf("FileID after a write = %+v, %v; want %+v", same, err, first)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := d.FileID(ctx, "f")
	if err != nil || !first.Other(again) {
		t.Fatalf("FileID of the file created again = %+v, %v; want another than %+v", again, err, first)
	}
	if _, err := d.FileID(ctx, "gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("FileID of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestDirWritesFollowNoSymlink: the cache writes files back long after the
// job wrote them, by their paths. A directory on the way that someone
// replaced with a symbolic link since must not send the data where the link
// points, into a file the writer never named; the write fails instead, and
// reads still follow links.
func TestDirWritesFollowNoSymlink(t *testing.T) {
	root := t.TempDir()
	d := NewDir(root)
	ctx := context.Background()
	if _, err := d.WriteAt(ctx, "a/sub/report", []byte("mine"), 0); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(root, "victim")
	if err := os.MkdirAll(filepath.Join(victim, "deeper"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "report"), []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "a/sub"), filepath.Join(root, "a/sub.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../victim", filepath.Join(root, "a/sub")); err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func() error{
		"write":                   func() error { _, err := d.WriteAt(ctx, "a/sub/report", []byte("MINE"), 0); return err },
		"truncate":                func() error { return d.Truncate(ctx, "a/sub/report", 1) },
		"write of a new file":     func() error { _, err := d.WriteAt(ctx, "a/sub/new", []byte("x"), 0); return err },
		"write making its parent": func() error { _, err := d.WriteAt(ctx, "a/sub/deeper/more/f", []byte("x"), 0); return err },
		"sync":                    func() error { return d.Sync(ctx, "a/sub/report") },
	} {
		if err := write(); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("%s through a directory replaced by a symbolic link: err = %v, want ELOOP", name, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(victim, "report")); string(got) != "theirs" {
		t.Errorf("the file the link points to holds %q, want %q", got, "theirs")
	}
	for _, p := range []string{"new", "deeper/more"} {
		if _, err := os.Lstat(filepath.Join(victim, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was made where the link points: %v", p, err)
		}
	}
	b := make([]byte, 6)
	if n, err := d.ReadAt(ctx, "a/sub/report", b, 0); string(b[:n]) != "theirs" {
		t.Errorf("read through the link = %q, %v; reads follow links", b[:n], err)
	}
}

// TestSyncDirOfADropBox fsyncs a directory that the caller may write files
// into but not read (mode 0733), as the engine does after writing a file
// back there: a privileged Dir syncs it with its own rights, since the
// name of the caller's file must be made durable and the fsync tells and
// changes nothing; one that is not refuses, as the kernel does.
func TestSyncDirOfADropBox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching identities needs root")
	}
	root := t.TempDir()
	os.Chmod(filepath.Dir(root), 0o755)
	os.Chmod(root, 0o755)
	if err := os.Mkdir(filepath.Join(root, "box"), 0o733); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(root, "box"), 0o733)
	ctx := ident.NewContext(context.Background(), ident.Cred{UID: 2000, GID: 2000})
	d := NewDir(root)
	if _, err := d.WriteAt(ctx, "box/f", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"box", "."} {
		if err := d.SyncDir(ctx, dir); err != nil {
			t.Errorf("SyncDir(%q) as 2000 in a privileged Dir: %v", dir, err)
		}
	}
	// Without rights of its own the Dir cannot open the box either, nor
	// could 2000 on the backing store: that must not keep the file's data
	// dirty for ever.
	d.privileged = false
	if err := d.SyncDir(ctx, "box"); err != nil {
		t.Errorf("SyncDir of the box as 2000 in an unprivileged Dir: %v, want it counted as done", err)
	}
	if err := d.SyncDir(ctx, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory: %v, want not exist", err)
	}
}

// TestDirCreatesForTheOwnerOnly: what a write creates (a file removed
// behind the cache, written back, its parents, a missing root) only its
// owner may read, whatever the umask lets through.
func TestDirCreatesForTheOwnerOnly(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	root := filepath.Join(t.TempDir(), "gone")
	d := NewDir(root)
	ctx := context.Background()
	if _, err := d.WriteAt(ctx, "a/b/written", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Truncate(ctx, "c/truncated", 10); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{
		"":            fs.ModeDir | 0o700,
		"a":           fs.ModeDir | 0o700,
		"a/b":         fs.ModeDir | 0o700,
		"a/b/written": 0o600,
		"c":           fs.ModeDir | 0o700,
		"c/truncated": 0o600,
	} {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%q: %v, %v; want mode %v", p, fi.Mode(), err, want)
		}
	}
}

// TestDirCrossesNoMount: reads and writes stay on the root's file system;
// a path through a file system mounted beneath the root fails with EXDEV
// and writes nothing there.
func TestDirCrossesNoMount(t *testing.T) {
	root := t.TempDir()
	at := filepath.Join(root, "mnt")
	if err := os.Mkdir(at, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", at, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(at, syscall.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(at, "f"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDir(root)
	ctx := context.Background()
	if _, err := d.WriteAt(ctx, "mnt/f", []byte("cache"), 0); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("write through a mount point: %v, want EXDEV", err)
	}
	if _, err := d.ReadAt(ctx, "mnt/f", make([]byte, 5), 0); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("read through a mount point: %v, want EXDEV", err)
	}
	if err := d.Truncate(ctx, "mnt/g", 10); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("truncate through a mount point: %v, want EXDEV", err)
	}
	if got, err := os.ReadFile(filepath.Join(at, "f")); err != nil || string(got) != "other" {
		t.Fatalf("file of the mounted file system: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(at, "g")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("truncate made a file on the mounted file system: %v", err)
	}
}
