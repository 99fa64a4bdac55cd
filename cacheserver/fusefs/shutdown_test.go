package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// stuckUnlink is a namespace whose Unlink blocks until release is closed,
// like a backing store that stopped answering.
type stuckUnlink struct {
	namespace.FS
	entered chan struct{}
	release chan struct{}
}

func (s *stuckUnlink) Unlink(ctx context.Context, p string) error {
	close(s.entered)
	<-s.release
	return s.FS.Unlink(ctx, p)
}

// mountStuck mounts a namespace whose Unlink blocks until the returned
// stuckUnlink is released, and leaves a handler stuck in it: the release of
// a file that was unlinked while open, which the kernel sends after
// close(2) returned, so nothing keeps the mount busy. It returns the mount
// and its directory.
func mountStuck(t *testing.T, timeout time.Duration) (*Server, *stuckUnlink, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting with mount(2) needs root")
	}
	backing, mnt := t.TempDir(), t.TempDir()
	p, err := posixns.New(backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	fsys := &stuckUnlink{FS: p, entered: make(chan struct{}), release: make(chan struct{})}
	s, err := Mount(mnt, fsys, Options{DirectMount: true, ShutdownTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	name := filepath.Join(mnt, "f")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	f.Close()
	<-fsys.entered
	return s, fsys, mnt
}

// TestUnmountDeadline proves that Unmount and Wait return within their
// deadline when a request handler never returns after the unmount itself
// succeeded.
func TestUnmountDeadline(t *testing.T) {
	s, fsys, mnt := mountStuck(t, 500*time.Millisecond)
	defer close(fsys.release)
	start := time.Now()
	err := s.Unmount()
	if !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Unmount with a stuck handler = %v, want ErrShutdownTimeout", err)
	}
	waited := make(chan struct{})
	go func() { s.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait hangs after Unmount gave up")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Unmount took %v with a 500ms shutdown timeout", d)
	}
	if mounted(t, mnt) {
		t.Errorf("%s is still mounted", mnt)
	}
}

// mounted reports whether dir is a mount point.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestAbortedUnmountIsNotClean: a request handler that hangs past the
// shutdown timeout gets the mount aborted, which fails what the kernel had
// in flight; Unmount must say so even when the handler returns soon after.
func TestAbortedUnmountIsNotClean(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s, fsys, _ := mountStuck(t, timeout)
	time.AfterFunc(3*timeout/2, func() { close(fsys.release) })
	if err := s.Unmount(); !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("Unmount that aborted the mount = %v, want ErrShutdownTimeout", err)
	}
}

// TestShowsConnOfAMountPointOfAnyName checks that a mount finds itself in
// mountinfo whatever the name of its mount point, so that a shutdown that
// times out aborts its connection rather than leave its requests hanging.
func TestShowsConnOfAMountPointOfAnyName(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting with mount(2) needs root")
	}
	for name, dir := range map[string]string{"space": "a b", "tab": "a\tb", "newline": "a\nb", "backslash": `a\b`, "Latin-1": "caf\xe9"} {
		t.Run(name, func(t *testing.T) {
			mnt := filepath.Join(t.TempDir(), dir)
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			p, err := posixns.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			s, err := Mount(mnt, p, Options{DirectMount: true, ShutdownTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
			if !s.showsConn() {
				t.Errorf("the mount on %q does not find its connection in mountinfo", mnt)
			}
			if err := s.Unmount(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
