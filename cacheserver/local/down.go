package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// ErrWriteBack is returned by Down when some dirty data could not be
// written back; it stays in the servers' cache directories for the next Up.
var ErrWriteBack = errors.New("write-back incomplete")

// Down unmounts (the mount publishes what it wrote), writes back every dirty
// byte of every server, and stops the servers. When write-back fails, the
// servers are stopped anyway, the error wraps ErrWriteBack, and the state
// and cache directories stay, so that Up over the same cache directory
// finds the data again. After a complete write-back the servers' cache
// directories, which then hold only clean copies, are removed.
func Down(ctx context.Context, bin string, st *State, timeout time.Duration) error {
	if err := unmount(bin, st, timeout); err != nil {
		return err
	}
	flushErr := flushAll(ctx, st)
	stopAll(bin, st)
	if flushErr != nil {
		return fmt.Errorf("%w: %w; the dirty data stays in %s and the next up recovers it", ErrWriteBack, flushErr, st.CacheDir)
	}
	for _, s := range st.Servers {
		_ = os.RemoveAll(filepath.Join(st.CacheDir, fmt.Sprintf("server-%d", s.Index)))
		_ = os.Remove(filepath.Join(st.CacheDir, fmt.Sprintf("server-%d.ready", s.Index)))
	}
	_ = os.Remove(filepath.Join(st.CacheDir, "mount.ready"))
	return st.forget()
}

// unmount stops the mount process, which unmounts and publishes file sizes,
// and detaches the mount if the process is gone but the mount is not.
func unmount(bin string, st *State, timeout time.Duration) error {
	err := stop(st.MountPID, bin, timeout)
	if mounted(st.Mount) {
		if uerr := syscall.Unmount(st.Mount, syscall.MNT_DETACH); uerr != nil {
			return fmt.Errorf("unmounting %s: %w", st.Mount, errors.Join(err, uerr))
		}
	}
	st.MountPID = 0
	return st.save()
}

// flushAll flushes every server in parallel.
func flushAll(ctx context.Context, st *State) error {
	errs := make([]error, len(st.Servers))
	var wg sync.WaitGroup
	for i, s := range st.Servers {
		wg.Go(func() {
			c, err := st.controlClient(s, nil)
			var res control.FlushResult
			if err == nil {
				res, err = c.Flush(ctx)
			}
			if err != nil {
				errs[i] = fmt.Errorf("server %d (%d bytes left): %w", s.Index, res.RemainingBytes, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopAll stops the mount and the servers.
func stopAll(bin string, st *State) {
	if st.MountPID != 0 {
		_ = stop(st.MountPID, bin, 30*time.Second)
		if mounted(st.Mount) {
			_ = syscall.Unmount(st.Mount, syscall.MNT_DETACH)
		}
	}
	var wg sync.WaitGroup
	for _, s := range st.Servers {
		wg.Go(func() { _ = stop(s.PID, bin, 30*time.Second) })
	}
	wg.Wait()
}

// mounted reports whether a file system is mounted on dir.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	return mountinfoHas(string(b), dir)
}
