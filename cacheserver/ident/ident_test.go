package ident

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching identities needs root (CAP_SETUID, CAP_SETGID)")
	}
}

// openDir returns a temporary directory that every user can traverse: the
// test's own temporary parent is 0700, which would refuse everyone but root.
func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// privateTree makes dir/private (0700, owned by 1000:1000) holding secret, and
// dir/group (0070, group 3000) holding shared.
func privateTree(t *testing.T) string {
	t.Helper()
	dir := openDir(t)
	for name, spec := range map[string]struct {
		mode     fs.FileMode
		uid, gid int
	}{
		"private": {0o700, 1000, 1000},
		"group":   {0o070, 0, 3000},
	} {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, spec.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "file"), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, spec.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, spec.uid, spec.gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDoEnforcesPermissionsOfTheIdentity(t *testing.T) {
	requireRoot(t)
	dir := privateTree(t)
	tests := map[string]struct {
		cred    Cred
		path    string
		wantErr error
	}{
		"owner reads under 0700":           {Cred{UID: 1000, GID: 1000}, "private/file", nil},
		"other user is refused under 0700": {Cred{UID: 2000, GID: 2000}, "private/file", fs.ErrPermission},
		"group member reads under 0070":    {Cred{UID: 2000, GID: 2000, Groups: []uint32{3000}}, "group/file", nil},
		"non-member is refused under 0070": {Cred{UID: 2000, GID: 2000, Groups: []uint32{4000}}, "group/file", fs.ErrPermission},
		"primary gid counts as the group":  {Cred{UID: 2000, GID: 3000}, "group/file", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Do(tc.cred, func() error {
				_, err := os.ReadFile(filepath.Join(dir, tc.path))
				return err
			})
			if !errors.Is(err, tc.wantErr) && (tc.wantErr != nil || err != nil) {
				t.Fatalf("read %s as %s: err = %v, want %v", tc.path, tc.cred, err, tc.wantErr)
			}
		})
	}
}

func TestDoCreatesFilesOwnedByTheIdentity(t *testing.T) {
	requireRoot(t)
	dir := openDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "new")
	err := Do(Cred{UID: 1234, GID: 5678}, func() error { return os.WriteFile(p, nil, 0o600) })
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234 || st.Gid != 5678 {
		t.Errorf("owner = %d:%d, want 1234:5678", st.Uid, st.Gid)
	}
}

func TestDoLeavesOtherThreadsAlone(t *testing.T) {
	requireRoot(t)
	dir := privateTree(t)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 100 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs <- Do(Cred{UID: 2000, GID: 2000}, func() error {
				if _, err := os.ReadFile(filepath.Join(dir, "private/file")); !errors.Is(err, fs.ErrPermission) {
					return errors.New("identity 2000 read a 0700 file of 1000")
				}
				return nil
			})
		}()
		go func() {
			defer wg.Done()
			// The process itself (root) must keep reading while others switch.
			if _, err := os.ReadFile(filepath.Join(dir, "private/file")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c := Process(); c.UID != 0 {
		t.Fatalf("process identity changed to %s", c)
	}
}

func TestDoContextUsesTheCallersIdentity(t *testing.T) {
	requireRoot(t)
	dir := privateTree(t)
	read := func() error {
		_, err := os.ReadFile(filepath.Join(dir, "private/file"))
		return err
	}
	if err := DoContext(context.Background(), read); err != nil {
		t.Fatalf("without an identity, the process (root) must read: %v", err)
	}
	ctx := NewContext(context.Background(), Cred{UID: 2000, GID: 2000})
	if err := DoContext(ctx, read); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("as 2000: err = %v, want permission denied", err)
	}
}

// TestSameIdentityCountsThePrimaryGroup covers a server started by a
// container runtime as 1000:1000, whose group list is [1000]: asked to act as
// 1000:1000 with no groups, it must act directly, since without CAP_SETGID
// any setgroups call fails.
func TestSameIdentityCountsThePrimaryGroup(t *testing.T) {
	for _, tc := range []struct {
		a, b Cred
		same bool
	}{
		{Cred{UID: 1000, GID: 1000}, Cred{UID: 1000, GID: 1000, Groups: []uint32{1000}}, true},
		{Cred{UID: 1000, GID: 1000, Groups: []uint32{2000}}, Cred{UID: 1000, GID: 1000, Groups: []uint32{2000, 1000, 2000}}, true},
		{Cred{UID: 1000, GID: 1000}, Cred{UID: 1000, GID: 1000, Groups: []uint32{2000}}, false},
		{Cred{UID: 1000, GID: 1000}, Cred{UID: 1000, GID: 2000, Groups: []uint32{1000}}, false},
		{Cred{UID: 1000, GID: 1000}, Cred{UID: 1001, GID: 1000}, false},
	} {
		if got := sameIdentity(tc.a, tc.b); got != tc.same {
			t.Errorf("sameIdentity(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
