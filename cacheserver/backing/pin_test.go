package backing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// TestOpenDirKeepsServingTheDirectoryItPinned replaces the backing
// directory by a symbolic link to another one: the server's identity keeps
// writing to the directory pinned, and another identity, which must reach
// the root by its path, is refused with ErrRootMoved rather than led
// through the link.
func TestOpenDirKeepsServingTheDirectoryItPinned(t *testing.T) {
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	root, moved, other := filepath.Join(base, "root"), filepath.Join(base, "moved"), filepath.Join(base, "other")
	for _, dir := range []string{root, other} {
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
	}
	f, err := os.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.Rename(root, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("other", root); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := d.WriteAt(ctx, "a", []byte("x"), 0); err != nil {
		t.Fatalf("write as the server: %v", err)
	}
	if _, err := os.Stat(filepath.Join(moved, "a")); err != nil {
		t.Errorf("the write did not land in the pinned directory: %v", err)
	}
	if os.Geteuid() == 0 {
		as := ident.NewContext(ctx, ident.Cred{UID: 2000, GID: 2000})
		if _, err := d.WriteAt(as, "b", []byte("x"), 0); !errors.Is(err, ErrRootMoved) {
			t.Errorf("write as another identity: %v, want ErrRootMoved", err)
		}
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Errorf("the link's target holds %v, want nothing", entries)
	}
}
