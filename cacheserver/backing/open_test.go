package backing

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

func TestDirNeverLeavesTheRootThroughSymlinks(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": outside, "rel": "../outside"} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	d, ctx := NewDir(root), context.Background()
	for _, link := range []string{"abs", "rel"} {
		if _, err := d.ReadAt(ctx, link+"/secret", make([]byte, 7), 0); err == nil {
			t.Errorf("read %s/secret through a link out of the root: succeeded", link)
		}
		if _, err := d.WriteAt(ctx, link+"/planted", []byte("x"), 0); err == nil {
			t.Errorf("write %s/planted through a link out of the root: succeeded", link)
		}
		if _, err := d.Stat(ctx, link+"/secret"); err == nil {
			t.Errorf("stat %s/secret through a link out of the root: succeeded", link)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file was planted outside the root: %v", err)
	}
}

// TestDirWritesBackFilesTheirOwnerMadeReadOnly covers a file created with
// mode 0444 and written through the creator's descriptor, as git and tar do:
// write-back must reach it for the owner, and only for the owner, whether
// the server may use its own rights or not.
func TestDirWritesBackFilesTheirOwnerMadeReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as other users")
	}
	for name, privileged := range map[string]bool{"privileged server": true, "server as the owner": false} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for _, p := range []string{filepath.Dir(root), root} {
				os.Chmod(p, 0o777)
			}
			file := filepath.Join(root, "obj")
			if err := os.WriteFile(file, nil, 0o444); err != nil {
				t.Fatal(err)
			}
			os.Chmod(file, 0o444)
			os.Chown(file, 1000, 1000)
			d := &Dir{root: root, privileged: privileged}
			owner := ident.NewContext(context.Background(), ident.Cred{UID: 1000, GID: 1000})
			other := ident.NewContext(context.Background(), ident.Cred{UID: 2000, GID: 2000})
			if _, err := d.WriteAt(other, "obj", []byte("intruder"), 0); !errors.Is(err, fs.ErrPermission) {
				t.Fatalf("write-back as a non-owner: err = %v, want permission denied", err)
			}
			if _, err := d.WriteAt(owner, "obj", []byte("object"), 0); err != nil {
				t.Fatalf("write-back as the owner: %v", err)
			}
			if err := d.Sync(owner, "obj"); err != nil {
				t.Fatalf("sync as the owner: %v", err)
			}
			got, _ := os.ReadFile(file)
			fi, _ := os.Stat(file)
			if string(got) != "object" || fi.Mode().Perm() != 0o444 {
				t.Fatalf("file = %q mode %v, want %q mode 0444", got, fi.Mode().Perm(), "object")
			}
		})
	}
}

func TestDirCreatesAMissingRootOnWrite(t *testing.T) {
	root := filepath.Join(t.TempDir(), "not", "yet")
	d := NewDir(root)
	if _, err := d.WriteAt(context.Background(), "a/f", []byte("x"), 0); err != nil {
		t.Fatalf("write under a missing root: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "a/f")); err != nil || string(got) != "x" {
		t.Fatalf("file = %q, %v", got, err)
	}
}
