package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// TestGetAttrProbingAnswersAsGetxattr asks servers acting as the caller
// about extended attributes with the attributes of files, for root and for
// a user who may not read some of them or not reach them at all: each
// answer is what a Getxattr of its own answers, and the attributes what
// GetAttr answers. The servers probe in one call of a namespace that can,
// and one call each of one that cannot.
func TestGetAttrProbingAnswersAsGetxattr(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	for name, wrap := range map[string]func(namespace.FS) namespace.FS{
		"prober":     nil,
		"not prober": func(ns namespace.FS) namespace.FS { return struct{ namespace.FS }{ns} },
	} {
		t.Run(name, func(t *testing.T) { testGetAttrProbing(t, wrap) })
	}
}

func testGetAttrProbing(t *testing.T, wrap func(namespace.FS) namespace.FS) {
	backing := t.TempDir()
	// The user must reach the backing directory, as on the file system
	// itself: the test's temporary parent is 0700.
	os.Chmod(filepath.Dir(backing), 0o755)
	os.Chmod(backing, 0o755)
	in := servertest.Start(t, backing, servertest.Options{Servers: 2, ExtentSize: testExtent, Secret: "k", ActAsCaller: true, WrapNS: wrap})
	f := connect(t, in)
	for p, mode := range map[string]os.FileMode{"open": 0o644, "private": 0o600, "walled/f": 0o644} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(backing, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(backing, p), nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(filepath.Join(backing, p), "user.x", []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("open", filepath.Join(backing, "link")); err != nil {
		t.Fatal(err)
	}
	names := []string{"user.x", "user.y", "security.selinux", "system.posix_acl_access", "trusted.t"}
	callers := map[string]context.Context{
		"root": context.Background(),
		"user": ident.NewContext(context.Background(), ident.Cred{UID: 1000, GID: 1000}),
	}
	for who, ctx := range callers {
		for _, p := range []string{"open", "private", "walled/f", "link", "missing"} {
			a, errs, err := f.GetAttrProbing(ctx, p, names)
			wantA, wantErr := f.GetAttr(ctx, p)
			if namespace.Errno(err) != namespace.Errno(wantErr) || a.Ino != wantA.Ino {
				t.Errorf("%s, %s: attributes %d, %v, want %d, %v", who, p, a.Ino, err, wantA.Ino, wantErr)
			}
			if err != nil {
				continue
			}
			got, want := fmt.Sprint(errnos(errs)), fmt.Sprint(xattrErrnos(ctx, f, p, names))
			if got != want {
				t.Errorf("%s, %s: probes of %v answered %s, want %s", who, p, names, got, want)
			}
		}
	}
	many := make([]string, wire.MaxXattrProbes+2)
	for i := range many {
		many[i] = fmt.Sprintf("user.n%d", i)
	}
	if _, errs, err := f.GetAttrProbing(context.Background(), "open", many); err != nil || len(errs) != wire.MaxXattrProbes {
		t.Errorf("probes of %d names: %d answers, %v, want %d", len(many), len(errs), err, wire.MaxXattrProbes)
	}
}

func errnos(errs []error) []string {
	var s []string
	for _, err := range errs {
		s = append(s, fmt.Sprint(namespace.Errno(err)))
	}
	return s
}

func xattrErrnos(ctx context.Context, f *FS, p string, names []string) []string {
	var errs []error
	for _, name := range names {
		_, err := f.Getxattr(ctx, p, name, nil)
		errs = append(errs, err)
	}
	return errnos(errs)
}
