package posix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/local"
)

// The local set-up starts a real instance with `burstcache local up`: two
// cache servers over the backing directory and a mount. Write-back and
// eviction start at 2% of the capacity (10 MiB a server), so that they run
// during the suites, while the capacity itself is large enough that the
// write window (ten times the capacity a day) holds every fsx seed.
var localUpArgs = []string{
	"--servers", "2", "--capacity", "1Gi", "--extent-size", "64Ki",
	"--server-arg=--dirty-high=2", "--server-arg=--dirty-low=1",
	"--server-arg=--evict-high=2", "--server-arg=--evict-low=1",
}

// localMounts maps the backing directory of each running local instance to
// its mount point, for sharing.
var localMounts sync.Map

// mountLocal starts a local instance, or a second mount of one (sharing),
// and stops it with the test.
func mountLocal(t *testing.T, o mountOptions) (dir, backing string) {
	bin := burstcacheBinary(t)
	if o.backing != "" {
		m, ok := localMounts.Load(o.backing)
		if !ok {
			t.Fatalf("no local instance serves %s", o.backing)
		}
		return extraMount(t, bin, m.(string), o.clientCache), o.backing
	}
	base := publicTempDir(t)
	backing, dir = o.backingDir(base), filepath.Join(base, "mnt")
	for _, d := range []string{backing, dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"local", "up", "--backing", backing, "--mount", dir, "--cache-dir", filepath.Join(base, "cache")}, localUpArgs...)
	if *fsxSoak > 0 {
		// The soak's fsx seeds write more than the write window holds.
		args = append(args, "--server-arg=--write-window-multiplier=-1")
	}
	if o.as != nil {
		args = append(args, "--uid", strconv.Itoa(int(o.as.UID)), "--gid", strconv.Itoa(int(o.as.GID)))
	} else {
		args = append(args, "--act-as-caller")
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("burstcache %v: %v\n%s", args, err, out)
	}
	instance := dir
	st, err := local.Load(instance)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { localDown(t, bin, st) })
	localMounts.Store(backing, instance)
	settlers.Store(instance, func(t *testing.T) { localFlush(t, bin, instance) })
	hinters.Store(instance, func(hint, path string) error { return localHint(bin, instance, hint, path) })
	t.Cleanup(func() { localMounts.Delete(backing); settlers.Delete(instance); hinters.Delete(instance) })
	if o.clientCache {
		return extraMount(t, bin, instance, true), backing
	}
	return instance, backing
}

// localFlush writes every dirty byte of the instance mounted at dir back.
func localFlush(t *testing.T, bin, dir string) {
	t.Helper()
	if out, err := exec.Command(bin, "local", "flush", "--mount", dir, dir).CombinedOutput(); err != nil {
		t.Fatalf("burstcache local flush --mount %s: %v\n%s", dir, err, out)
	}
}

// localHint sends a hint (flush, evict, invalidate) for path to every
// server of the instance mounted at dir.
func localHint(bin, dir, hint, path string) error {
	if out, err := exec.Command(bin, "local", hint, "--mount", dir, path).CombinedOutput(); err != nil {
		return fmt.Errorf("burstcache local %s --mount %s %s: %w: %s", hint, dir, path, err, out)
	}
	return nil
}

// localDown stops a local instance, writing every dirty byte back. If that
// fails, it stops the instance's processes itself, so that no server
// outlives the test.
func localDown(t *testing.T, bin string, st *local.State) {
	out, err := exec.Command(bin, "local", "down", "--mount", st.Mount).CombinedOutput()
	if err == nil {
		return
	}
	t.Errorf("burstcache local down --mount %s: %v\n%s", st.Mount, err, out)
	pids := []int{st.MountPID}
	for _, s := range st.Servers {
		pids = append(pids, s.PID)
	}
	for _, pid := range pids {
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	unix.Unmount(st.Mount, unix.MNT_DETACH)
}

// extraMount runs one more `burstcache mount` of the instance mounted at
// instanceMount, with the client cache if asked, and returns its mount
// point.
func extraMount(t *testing.T, bin, instanceMount string, clientCache bool) string {
	st, err := local.Load(instanceMount)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(publicTempDir(t), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(filepath.Dir(dir), "ready")
	args := mountArgs(st.MountArgs, dir, ready, clientCache)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopMount(t, cmd, dir) })
	settlers.Store(dir, func(t *testing.T) { localFlush(t, bin, instanceMount) })
	hinters.Store(dir, func(hint, path string) error {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return localHint(bin, instanceMount, hint, filepath.Join(instanceMount, rel))
	})
	t.Cleanup(func() { settlers.Delete(dir); hinters.Delete(dir) })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return dir
		}
	}
	t.Fatalf("burstcache %v did not become ready", args)
	return ""
}

// mountArgs turns the arguments of the instance's own mount into those of
// another mount at dir.
func mountArgs(orig []string, dir, ready string, clientCache bool) []string {
	args := append([]string(nil), orig[:len(orig)-1]...)
	for i := range args {
		if args[i] == "--ready-file" && i+1 < len(args) {
			args[i+1] = ready
		}
	}
	if clientCache {
		args = append(args, "--client-cache")
	}
	return append(args, dir)
}

// stopMount stops a mount process as local down would: SIGTERM, which
// unmounts and publishes what it wrote.
func stopMount(t *testing.T, cmd *exec.Cmd, dir string) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("mount at %s: %v", dir, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("mount at %s did not stop", dir)
		cmd.Process.Kill()
		unix.Unmount(dir, unix.MNT_DETACH)
	}
}

var (
	burstcacheOnce sync.Once
	burstcachePath string
	burstcacheErr  error
)

// burstcacheBinary returns the burstcache binary: BURSTCACHE_BIN, which
// make test sets, or one built for this run.
func burstcacheBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("BURSTCACHE_BIN"); bin != "" {
		return bin
	}
	burstcacheOnce.Do(func() {
		dir, err := os.MkdirTemp("", "burstcache-posix-bin-")
		if err != nil {
			burstcacheErr = err
			return
		}
		burstcachePath = filepath.Join(dir, "burstcache")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "go", "build", "-o", burstcachePath, "github.com/burstcache/burstcache/cmd/burstcache").CombinedOutput()
		if err != nil {
			burstcacheErr = fmt.Errorf("building burstcache: %w\n%s", err, out)
		}
	})
	if burstcacheErr != nil {
		t.Fatal(burstcacheErr)
	}
	if _, err := os.Stat(burstcachePath); errors.Is(err, os.ErrNotExist) {
		t.Fatalf("burstcache binary %s is missing", burstcachePath)
	}
	return burstcachePath
}
