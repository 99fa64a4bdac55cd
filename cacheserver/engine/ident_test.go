package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
)

// TestCopyUpRunsAsTheCaller checks, as root, that a read on behalf of an
// unprivileged identity cannot copy up a file under another user's 0700
// directory, while its owner can; and that write-back creates files as the
// identity of their last writer.
func TestCopyUpRunsAsTheCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching identities needs root")
	}
	r := newRig(t, 4096, 8, nil)
	for _, d := range []string{filepath.Dir(r.root), r.root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.writeBacking("private/refused", []byte("secret"))
	r.writeBacking("private/allowed", []byte("secret"))
	r.writeBacking("open/.keep", nil)
	for d, mode := range map[string]fs.FileMode{"private": 0o700, "open": 0o777} {
		p := filepath.Join(r.root, d)
		if err := errors.Join(os.Chmod(p, mode), os.Chown(p, 1000, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	// Each case reads its own file: a hit is served without asking the
	// backing store, so access checks on open are the caller's business.
	tests := map[string]struct {
		cred    ident.Cred
		path    string
		wantErr error
	}{
		"other user is refused": {ident.Cred{UID: 2000, GID: 2000}, "private/refused", fs.ErrPermission},
		"owner reads":           {ident.Cred{UID: 1000, GID: 1000}, "private/allowed", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := ident.NewContext(context.Background(), tc.cred)
			b := make([]byte, 6)
			_, err := r.e.ReadAt(ctx, tc.path, b, 0)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && (err != nil || string(b) != "secret")) {
				t.Fatalf("read as %s: %q, %v; want %v", tc.cred, b, err, tc.wantErr)
			}
		})
	}
	if r.faulty.Calls(backing.OpCopyRange) == 0 || r.e.noKernelCopy.Load() {
		t.Fatal("the owner's copy-up did not run in the kernel")
	}
	ctx := ident.NewContext(context.Background(), ident.Cred{UID: 1234, GID: 5678})
	if _, err := r.e.WriteAt(ctx, "open/new", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(r.root, "open/new"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 5678 {
		t.Fatalf("written back as %d:%d, want 1234:5678", st.Uid, st.Gid)
	}
}

// TestRefusedUnlinkKeepsDirtyData: a removal the backing store refuses must
// not throw away the cached data.
func TestRefusedUnlinkKeepsDirtyData(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching identities needs root")
	}
	r := newRig(t, 4096, 8, nil)
	for _, d := range []string{filepath.Dir(r.root), r.root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.writeBacking("private/f", []byte("old"))
	if err := os.Chmod(filepath.Join(r.root, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	r.write("private/f", 0, []byte("new data"))
	ctx := ident.NewContext(context.Background(), ident.Cred{UID: 2000, GID: 2000})
	if err := r.e.Unlink(ctx, "private/f"); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("unlink as 2000: %v, want permission denied", err)
	}
	if got := string(r.readAll("private/f")); got != "new data" {
		t.Fatalf("after the refused unlink: %q", got)
	}
}
