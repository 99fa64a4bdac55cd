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
