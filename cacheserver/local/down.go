package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// ErrWriteBack is returned by Down when some dirty data could not be
// written back; it stays in the servers' cache directories for the next Up.
var ErrWriteBack = errors.New("write-back incomplete")

// ErrMountUnpublished is returned by Down when the mount did not end
// having made durable and published everything it was given: it said so,
// or it ended without saying (killed, or crashed). Writes of the job may be
// lost; the mount's log names the files.
var ErrMountUnpublished = errors.New("the mount did not publish everything it was given")

// Down unmounts (the mount publishes what it wrote), writes back every dirty
// byte of every server, has the servers remove the hidden names that files
// unlinked while open keep when the mount ended before their last close
// (a crash), and stops the servers. A hidden name that cannot be removed
// loses nothing: Down says so on warn and goes on. When write-back fails, the
// servers are stopped anyway, the error wraps ErrWriteBack, and the state
// and cache directories stay, so that Up over the same cache directory
// finds the data again. After a complete write-back the servers' cache
// directories, which then hold only clean copies, are removed. A mount
// that did not publish everything makes the error wrap ErrMountUnpublished
// too: what the servers hold is written back all the same.
func Down(ctx context.Context, bin string, st *State, timeout time.Duration, warn io.Writer) error {
	unpublished, err := unmount(bin, st, timeout)
	if err != nil {
		return err
	}
	flushErr := flushAll(ctx, st, warn)
	if flushErr == nil {
		// Only now: a name removed while another server still held data
		// of it would come back with that data's write-back.
		if err := removeHiddenAll(ctx, st, warn); err != nil {
			_, _ = fmt.Fprintf(warn, "burstcache: warning: %v\n", err)
		}
	}
	stopAll(bin, st)
	if flushErr != nil {
		return errors.Join(fmt.Errorf("%w: %w; the dirty data stays in %s and the next up recovers it", ErrWriteBack, flushErr, st.CacheDir), unpublished)
	}
	for _, s := range st.Servers {
		_ = os.RemoveAll(filepath.Join(st.CacheDir, fmt.Sprintf("server-%d", s.Index)))
		_ = os.Remove(filepath.Join(st.CacheDir, fmt.Sprintf("server-%d.ready", s.Index)))
	}
	_ = os.Remove(filepath.Join(st.CacheDir, "mount.ready"))
	return errors.Join(unpublished, st.forget())
}

// unmount stops the mount process, which unmounts and publishes what it
// was given, and detaches the mount if the process is gone but the mount
// is not. It returns what the mount said of what it published (see
// mountVerdict), and an error if the mount could not be taken away.
func unmount(bin string, st *State, timeout time.Duration) (unpublished, err error) {
	if st.MountPID == 0 {
		// An earlier down stopped the mount and reported its verdict.
		return nil, nil
	}
	stopErr := stop(st.MountPID, st.MountStart, bin, timeout)
	if mounted(st.Mount) {
		if err := syscall.Unmount(st.Mount, syscall.MNT_DETACH); err != nil {
			return nil, fmt.Errorf("unmounting %s: %w", st.Mount, errors.Join(stopErr, err))
		}
	}
	unpublished = mountVerdict(st, stopErr)
	// Durable step: the mount is gone. A crash before this save finds the
	// mount's process gone at the next down, and its exit file, which says
	// the same again.
	st.MountPID, st.MountStart = 0, 0
	if err := st.save(); err != nil {
		return nil, err
	}
	_ = os.Remove(mountExitPath(st.CacheDir))
	return unpublished, nil
}

// mountExitPath is the file where the mount records how it ended.
func mountExitPath(cacheDir string) string { return filepath.Join(cacheDir, "mount.exit.json") }

// mountExit is what `burstcache mount --exit-file` writes.
type mountExit struct {
	Code  int    `json:"code"`
	Error string `json:"error"`
}

// mountVerdict returns nil if the mount ended saying that it published
// everything, and an error wrapping ErrMountUnpublished otherwise. stopErr
// is the error of stopping it. A mount started without an exit file (by an
// older up) is judged by stopErr alone.
func mountVerdict(st *State, stopErr error) error {
	if stopErr != nil {
		return fmt.Errorf("%w: %w", ErrMountUnpublished, stopErr)
	}
	if !slices.Contains(st.MountArgs, "--exit-file") {
		return nil
	}
	var e mountExit
	err := readJSON(mountExitPath(st.CacheDir), &e)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: it ended without saying how (killed?); see %s", ErrMountUnpublished, filepath.Join(st.CacheDir, "logs", "mount.log"))
	case err != nil:
		return fmt.Errorf("%w: %w", ErrMountUnpublished, err)
	case e.Code != 0:
		return fmt.Errorf("%w: exit code %d: %s", ErrMountUnpublished, e.Code, e.Error)
	}
	return nil
}

// flushAll flushes every server in parallel, and says on out how much they
// have left every flushProgressEvery.
func flushAll(ctx context.Context, st *State, out io.Writer) error {
	defer reportFlush(ctx, st, out)()
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

// flushProgressEvery is how often local down says how many dirty bytes the
// servers have left to write back: the write-back of a large cache takes
// minutes, and nothing else shows that it moves.
var flushProgressEvery = 10 * time.Second

// reportFlush prints the dirty bytes the servers have left on out every
// flushProgressEvery, until the function it returns is called.
func reportFlush(ctx context.Context, st *State, out io.Writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		tick := time.NewTicker(flushProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_, _ = fmt.Fprintf(out, "burstcache: writing back: %s dirty left after %v\n",
					control.FormatBytes(dirtyLeft(ctx, st)), time.Since(start).Round(time.Second))
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// dirtyLeft sums the dirty bytes of the servers that answer within a second.
func dirtyLeft(ctx context.Context, st *State) int64 {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var n int64
	for _, s := range st.Servers {
		c, err := st.controlClient(s, nil)
		if err != nil {
			continue
		}
		if stats, err := c.Stats(ctx); err == nil {
			n += stats.DirtyBytes
		}
	}
	return n
}

// removeHiddenAll has every server remove the hidden names it recorded,
// and says on warn which files hidden for renames that failed they gave
// their names back instead.
func removeHiddenAll(ctx context.Context, st *State, warn io.Writer) error {
	var errs []error
	for _, s := range st.Servers {
		c, err := st.controlClient(s, nil)
		if err == nil {
			var res control.HiddenResult
			res, err = c.RemoveHidden(ctx)
			for _, b := range res.GivenBack {
				p, as := filepath.Join(st.Backing, string(b.Path)), filepath.Join(st.Backing, string(b.As))
				if p == as {
					_, _ = fmt.Fprintf(warn, "burstcache: %s was given its name back: a rename over it failed while a cache server was down, and the mount ended before it could give the name back\n", p)
				} else {
					_, _ = fmt.Fprintf(warn, "burstcache: warning: %s is kept as %s: a rename over it failed while a cache server was down, the mount ended before it could give the name back, and another file has the name now\n", p, as)
				}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("server %d: %w", s.Index, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("files unlinked while open keep their hidden names (.burstcache-open-...) in %s: %w", st.Backing, errors.Join(errs...))
	}
	return nil
}

// stopAll stops the mount and the servers.
func stopAll(bin string, st *State) {
	if st.MountPID != 0 {
		_ = stop(st.MountPID, st.MountStart, bin, 30*time.Second)
		if mounted(st.Mount) {
			_ = syscall.Unmount(st.Mount, syscall.MNT_DETACH)
		}
	}
	var wg sync.WaitGroup
	for _, s := range st.Servers {
		wg.Go(func() { _ = stop(s.PID, s.Start, bin, 30*time.Second) })
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
