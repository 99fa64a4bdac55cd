package fusefs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// slowNames is a namespace whose lookups, listings and attribute reads take
// a while and give up when their context ends, as calls to a cache server
// do (with EINTR).
type slowNames struct {
	*posixns.FS
}

const slowCall = 200 * time.Millisecond

func (s slowNames) wait(ctx context.Context) error {
	select {
	case <-time.After(slowCall):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", syscall.EINTR, ctx.Err())
	}
}

func (s slowNames) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	if err := s.wait(ctx); err != nil {
		return namespace.Attr{}, err
	}
	return s.FS.GetAttr(ctx, p)
}

func (s slowNames) Listxattr(ctx context.Context, p string, dest []byte) (int, error) {
	if err := s.wait(ctx); err != nil {
		return 0, err
	}
	return s.FS.Listxattr(ctx, p, dest)
}

func (s slowNames) Getxattr(ctx context.Context, p, name string, dest []byte) (int, error) {
	if err := s.wait(ctx); err != nil {
		return 0, err
	}
	return s.FS.Getxattr(ctx, p, name, dest)
}

func (s slowNames) ReadDirPage(ctx context.Context, p string, cookie uint64, max int) ([]namespace.DirEntry, uint64, bool, error) {
	if err := s.wait(ctx); err != nil {
		return nil, 0, false, err
	}
	return s.FS.ReadDirPage(ctx, p, cookie, max)
}

// TestSignalsDoNotFailCalls sends signals that the caller handles (the Go
// runtime's own preemption signal) to a thread while it waits on the mount
// for lookups, attribute and xattr reads and listings. The kernel passes
// each one on as an interrupt of the request; the calls must still succeed,
// as they do on a local file system or a hard NFS mount, where only a
// fatal signal cuts them short. Programs do not expect EINTR from stat(2)
// or listxattr(2), and the Go runtime signals its threads all the time.
func TestSignalsDoNotFailCalls(t *testing.T) {
	mnt, backing, _, _ := mountOver(t, Options{AttrTimeout: time.Nanosecond}, func(p *posixns.FS) slowNames { return slowNames{p} })
	for _, d := range []string{"a", "b", "c"} {
		if err := os.MkdirAll(filepath.Join(backing, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(backing, d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	tid := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- unix.Gettid()
		errs <- func() error {
			for _, d := range []string{"a", "b", "c"} {
				p := filepath.Join(mnt, d, "f")
				var st unix.Stat_t
				if err := unix.Lstat(p, &st); err != nil {
					return fmt.Errorf("lstat %s: %w", p, err)
				}
				if _, err := unix.Listxattr(p, make([]byte, 4096)); err != nil {
					return fmt.Errorf("listxattr %s: %w", p, err)
				}
				if _, err := unix.Getxattr(p, "user.none", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
					return fmt.Errorf("getxattr %s: %w, want ENODATA", p, err)
				}
				f, err := os.Open(filepath.Join(mnt, d))
				if err != nil {
					return err
				}
				_, err = unix.Getdents(int(f.Fd()), make([]byte, 4096))
				f.Close()
				if err != nil {
					return fmt.Errorf("getdents %s: %w", d, err)
				}
			}
			return nil
		}()
	}()

	caller := <-tid
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; ; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			if sent < 10 {
				t.Fatalf("only %d signals reached the caller", sent)
			}
			return
		case <-tick.C:
			if err := unix.Tgkill(os.Getpid(), caller, unix.SIGURG); err == nil {
				sent++
			}
		}
	}
}
