package posixns

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// TestCallerPermissions proves that the kernel checks every operation as the
// identity in the context, parent directories included.
func TestCallerPermissions(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	mustWrite(t, filepath.Join(dir, "private/f"), "secret", 0o644)
	if err := os.Chmod(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "ro/f"), "x", 0o644)
	mustWrite(t, filepath.Join(dir, "ro/private"), "x", 0o600)
	ctx := asNobody()
	tests := map[string]struct {
		op   func() error
		want syscall.Errno
	}{
		"stat under a 0700 directory":  {func() error { _, err := fsys.GetAttr(ctx, "private/f"); return err }, syscall.EACCES},
		"list a 0700 directory":        {func() error { _, err := fsys.ReadDir(ctx, "private"); return err }, syscall.EACCES},
		"read under a 0700 directory":  {func() error { _, err := fsys.ReadAt(ctx, "private/f", make([]byte, 6), 0); return err }, syscall.EACCES},
		"open under a 0700 directory":  {func() error { _, err := fsys.Open(ctx, "private/f", os.O_RDONLY); return err }, syscall.EACCES},
		"create in another's dir":      {func() error { _, err := fsys.Create(ctx, "ro/new", os.O_RDWR, 0o644); return err }, syscall.EACCES},
		"unlink in another's dir":      {func() error { return fsys.Unlink(ctx, "ro/f") }, syscall.EACCES},
		"rename out of another's dir":  {func() error { return fsys.Rename(ctx, "ro/f", "stolen", 0) }, syscall.EACCES},
		"open another's file to write": {func() error { _, err := fsys.Open(ctx, "ro/f", os.O_WRONLY); return err }, syscall.EACCES},
		"chmod of another's file": {func() error {
			m := uint32(0o777)
			_, err := fsys.SetAttr(ctx, "ro/f", namespace.SetAttr{Mode: &m})
			return err
		}, syscall.EPERM},
		"read another's 0600 file":  {func() error { _, err := fsys.ReadAt(ctx, "ro/private", make([]byte, 1), 0); return err }, syscall.EACCES},
		"write another's 0644 file": {func() error { _, err := fsys.WriteAt(ctx, "ro/f", []byte("x"), 0); return err }, syscall.EACCES},
		"access for writing":        {func() error { return fsys.Access(ctx, "ro/f", 2) }, syscall.EACCES},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { wantErrno(t, name, tc.op(), tc.want) })
	}
	if err := fsys.Access(ctx, "ro/f", 4); err != nil {
		t.Fatalf("access for reading: %v", err)
	}
}

// TestCallerOwnsNewFiles proves that new files belong to the caller.
func TestCallerOwnsNewFiles(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	if err := os.Mkdir(filepath.Join(dir, "pub"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "pub"), 0o777)
	ctx := asNobody()
	for name, mk := range map[string]func(string) (namespace.Attr, error){
		"create":  func(p string) (namespace.Attr, error) { return fsys.Create(ctx, p, os.O_RDWR, 0o640) },
		"mkdir":   func(p string) (namespace.Attr, error) { return fsys.Mkdir(ctx, p, 0o750) },
		"symlink": func(p string) (namespace.Attr, error) { return fsys.Symlink(ctx, "x", p) },
	} {
		a, err := mk("pub/" + name)
		if err != nil || a.UID != nobody.UID || a.GID != nobody.GID {
			t.Errorf("%s: owner %d:%d, %v; want %s", name, a.UID, a.GID, err, nobody)
		}
	}
}

// TestOpenFileStaysWritable proves the POSIX rule that a file created with a
// read-only mode can still be written through the descriptor that created
// it, and that the write, made as the caller, clears the setuid bit.
func TestOpenFileStaysWritable(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	os.Chmod(dir, 0o777)
	ctx := asNobody()
	if _, err := fsys.Create(ctx, "f", os.O_RDWR, 0o444); err != nil {
		t.Fatal(err)
	}
	if n, err := fsys.WriteAt(ctx, "f", []byte("abc"), 0); err != nil || n != 3 {
		t.Fatalf("WriteAt to a 0444 file created by the caller = %d, %v", n, err)
	}
	m := uint32(0o4755)
	if _, err := fsys.SetAttr(ctx, "f", namespace.SetAttr{Mode: &m}); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.WriteAt(ctx, "f", []byte("d"), 3); err != nil {
		t.Fatal(err)
	}
	a, err := fsys.GetAttr(ctx, "f")
	if err != nil || a.Mode != syscall.S_IFREG|0o755 || a.Size != 4 {
		t.Fatalf("after a write by the owner: mode %o size %d, %v; want setuid cleared", a.Mode, a.Size, err)
	}
}

// TestRootWriteKeepsSetuid is the counterpart: a write by root (who has
// CAP_FSETID) keeps the bit, as on a local file system.
func TestRootWriteKeepsSetuid(t *testing.T) {
	needRoot(t)
	fsys, _ := newFS(t)
	ctx := context.Background()
	if _, err := fsys.Create(ctx, "f", os.O_RDWR, 0o4755); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.WriteAt(ctx, "f", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if a, _ := fsys.GetAttr(ctx, "f"); a.Mode != syscall.S_IFREG|0o4755 {
		t.Fatalf("mode %o after a write by root, want %o", a.Mode, syscall.S_IFREG|0o4755)
	}
}

// TestTruncateOpen proves that a file created with mode 0 can be truncated
// through the descriptor that created it, while a truncation by path is
// refused, and that another user's file cannot be truncated either way.
func TestTruncateOpen(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	os.Chmod(dir, 0o777)
	mustWrite(t, filepath.Join(dir, "other"), "data", 0o644)
	ctx := asNobody()
	if _, err := fsys.Create(ctx, "mine", os.O_RDWR, 0); err != nil {
		t.Fatal(err)
	}
	size := int64(100)
	_, err := fsys.SetAttr(ctx, "mine", namespace.SetAttr{Size: &size})
	wantErrno(t, "truncate by path of a mode 0 file", err, syscall.EACCES)
	a, err := fsys.TruncateOpen(ctx, "mine", size)
	if err != nil || a.Size != size {
		t.Fatalf("TruncateOpen = size %d, %v", a.Size, err)
	}
	_, err = fsys.TruncateOpen(ctx, "other", 0)
	wantErrno(t, "TruncateOpen of another user's file", err, syscall.EACCES)
}

// TestClearSetid proves that a writer who does not own a world-writable
// setuid file gets its bits cleared, while a caller who may not write the
// file cannot clear them. Setgid without group execute goes only for a
// writer outside the file's group, as in the kernel since Linux 6.2.
func TestClearSetid(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	mustWrite(t, filepath.Join(dir, "shared"), "x", 0o6777)
	mustWrite(t, filepath.Join(dir, "private"), "x", 0o6755)
	mustWrite(t, filepath.Join(dir, "locking"), "x", 0o2666)
	mustWrite(t, filepath.Join(dir, "group"), "x", 0o2666)
	if err := os.Chown(filepath.Join(dir, "group"), 0, int(nobody.GID)); err != nil {
		t.Fatal(err)
	}
	ctx := asNobody()
	a, err := fsys.ClearSetid(ctx, "shared")
	if err != nil || a.Mode != syscall.S_IFREG|0o777 {
		t.Fatalf("ClearSetid of a world-writable file = %o, %v; want 0777", a.Mode, err)
	}
	_, err = fsys.ClearSetid(ctx, "private")
	wantErrno(t, "ClearSetid of a file the caller cannot write", err, syscall.EACCES)
	if a, _ := fsys.GetAttr(ctx, "private"); a.Mode != syscall.S_IFREG|0o6755 {
		t.Fatalf("refused ClearSetid changed the mode to %o", a.Mode)
	}
	if a, err := fsys.ClearSetid(ctx, "locking"); err != nil || a.Mode != syscall.S_IFREG|0o666 {
		t.Fatalf("ClearSetid of a setgid file of another group = %o, %v; want 0666", a.Mode, err)
	}
	if a, err := fsys.ClearSetid(ctx, "group"); err != nil || a.Mode != syscall.S_IFREG|0o2666 {
		t.Fatalf("ClearSetid of a setgid file of the writer's group = %o, %v; want 02666 kept", a.Mode, err)
	}
}

// TestKillSetid proves that a change of nothing with KillSetid is the
// caller's chown to no owner: the owner loses setuid and setgid, and
// another caller is refused for a file it would change.
func TestKillSetid(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	mustWrite(t, filepath.Join(dir, "mine"), "x", 0o6755)
	mustWrite(t, filepath.Join(dir, "theirs"), "x", 0o6755)
	if err := os.Chown(filepath.Join(dir, "mine"), int(nobody.UID), int(nobody.GID)); err != nil {
		t.Fatal(err)
	}
	ctx := asNobody()
	a, err := fsys.SetAttr(ctx, "mine", namespace.SetAttr{KillSetid: true})
	if err != nil || a.Mode != syscall.S_IFREG|0o755 {
		t.Fatalf("KillSetid by the owner = %o, %v; want 0755", a.Mode, err)
	}
	_, err = fsys.SetAttr(ctx, "theirs", namespace.SetAttr{KillSetid: true})
	wantErrno(t, "KillSetid by another caller", err, syscall.EPERM)
}

// TestOpenExec proves that an open to execute needs execute permission
// and no read permission, and that the program it opened can then be read
// for the kernel that runs it, while an open to read stays refused.
func TestOpenExec(t *testing.T) {
	needRoot(t)
	fsys, dir := newFS(t)
	mustWrite(t, filepath.Join(dir, "xonly"), "prog", 0o711)
	mustWrite(t, filepath.Join(dir, "ronly"), "prog", 0o744)
	ctx := asNobody()
	if _, err := fsys.Open(ctx, "xonly", syscall.O_RDONLY|namespace.OpenExec); err != nil {
		t.Fatalf("open to execute a 0711 file: %v", err)
	}
	buf := make([]byte, 4)
	if n, err := fsys.ReadAt(ctx, "xonly", buf, 0); err != nil || string(buf[:n]) != "prog" {
		t.Fatalf("reading the program opened to execute: %q, %v", buf[:n], err)
	}
	_, err := fsys.Open(ctx, "xonly", syscall.O_RDONLY)
	wantErrno(t, "open to read a 0711 file", err, syscall.EACCES)
	_, err = fsys.Open(ctx, "ronly", syscall.O_RDONLY|namespace.OpenExec)
	wantErrno(t, "open to execute a 0744 file", err, syscall.EACCES)
	_, err = fsys.Open(ctx, "", syscall.O_RDONLY|namespace.OpenExec)
	wantErrno(t, "open to execute a directory", err, syscall.EACCES)
}
