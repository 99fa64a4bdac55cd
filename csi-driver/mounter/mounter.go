package mounter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/mount-utils"
)

// Sentinel errors of Stop, matched with errors.Is.
var (
	// ErrNotPublished means the daemon ended without publishing everything
	// it wrote: it exited with an error, or was killed before it could say.
	// Its mount may be gone, but the volume is not safely released.
	ErrNotPublished = errors.New("mount daemon did not publish what it wrote")
	// ErrStopTimeout means the daemon still runs after it was asked to stop.
	// It was not killed: killing it would drop what it has not published.
	ErrStopTimeout = errors.New("mount daemon did not stop in time")
	// ErrNotReady means a daemon ended, or ctx ended, before its mount served.
	ErrNotReady = errors.New("mount daemon did not become ready")
)

// Files of a mount's state directory; see the package documentation.
const (
	SecretFile = "secret"
	// MountKeyFile is the private mount key, for a Spec with MountKey.
	MountKeyFile = "mount.key"
	readyFile    = "ready.json"
	exitFile     = "exit.json"
	logFile      = "mount.log"
)

// Spec is one FUSE mount of a cache instance on this node.
type Spec struct {
	// Namespace and Instance name the CacheInstance.
	Namespace, Instance string
	// Node is the node the mount is on; it also picks the server of a
	// load-balanced instance.
	Node string
	// Target is the directory the daemon mounts on (the staging path).
	Target string
	// Dir is the mount's state directory. It must be reachable at the same
	// path by the plugin and by the daemon.
	Dir string
	// Servers are the data addresses of the instance's servers, in index order.
	Servers []string
	// ExtentSize is the instance's extent size in bytes.
	ExtentSize int64
	// LoadBalanced mounts a read-only load-balanced instance.
	LoadBalanced bool
	// ClientCache lets the node's kernel keep the instance's data in its
	// page cache and write-back cache (the instance's spec.clientCache).
	ClientCache bool
	// PerCaller mounts an instance whose servers act as each caller.
	PerCaller bool
	// MountKey signs the handshake with the servers with the key in
	// MountKeyFile of Dir, for servers that admit only mounts.
	MountKey bool
}

// Args returns the arguments of `burstcache mount` for the spec.
func (s Spec) Args() []string {
	args := []string{"mount",
		"--servers", strings.Join(s.Servers, ","),
		"--secret-file", filepath.Join(s.Dir, SecretFile),
		"--extent-size", strconv.FormatInt(s.ExtentSize, 10),
		"--ready-file", filepath.Join(s.Dir, readyFile),
		"--exit-file", filepath.Join(s.Dir, exitFile),
	}
	if s.LoadBalanced {
		args = append(args, "--load-balanced", "--node", s.Node)
	}
	if s.ClientCache {
		args = append(args, "--client-cache")
	}
	if s.PerCaller {
		args = append(args, "--per-caller")
	}
	if s.MountKey {
		args = append(args, "--mount-key-file", filepath.Join(s.Dir, MountKeyFile))
	}
	return append(args, s.Target)
}

// Mounter starts and stops the FUSE daemon of a Spec. Implementations must
// keep the daemon running when the caller's process or container ends, and
// must find a daemon they did not start themselves (started by an earlier
// plugin) from the Spec alone.
type Mounter interface {
	// Start starts a daemon for s and returns once its mount serves at
	// s.Target. s.Target must not be mounted. It returns an error wrapping
	// ErrNotReady if the daemon ended, or ctx ended, before that; then no
	// daemon of s runs (one that never served holds nothing to publish).
	Start(ctx context.Context, s Spec) error
	// Running reports whether the daemon of s runs.
	Running(ctx context.Context, s Spec) (bool, error)
	// Stop asks the daemon of s to unmount and publish what it wrote, and
	// waits until it has ended or ctx ends. It returns nil only when the
	// daemon reported that it published everything; ErrNotPublished when it
	// ended otherwise; ErrStopTimeout when it still runs. It never kills a
	// daemon.
	Stop(ctx context.Context, s Spec) error
}

// prepare removes what an earlier daemon of the same mount left behind, so
// that readiness and the exit code are those of the next daemon.
func prepare(dir string) error {
	for _, f := range []string{readyFile, exitFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// ready reports whether the daemon of s said it serves and its mount is in
// place.
func ready(s Spec) bool {
	if _, err := os.Stat(filepath.Join(s.Dir, readyFile)); err != nil {
		return false
	}
	ok, _ := Mounted(s.Target)
	return ok
}

// exitInfo is what `burstcache mount --exit-file` writes.
type exitInfo struct {
	Code  int    `json:"code"`
	Error string `json:"error"`
}

// ExitStatus returns nil if the daemon of the mount in dir ended and said it
// published everything, and an error wrapping ErrNotPublished otherwise.
func ExitStatus(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, exitFile))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: it ended without recording an exit code (killed?)", ErrNotPublished)
	}
	if err != nil {
		return err
	}
	var info exitInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return fmt.Errorf("%w: unreadable exit file: %w", ErrNotPublished, err)
	}
	if info.Code != 0 {
		return fmt.Errorf("%w: exit code %d: %s", ErrNotPublished, info.Code, info.Error)
	}
	return nil
}

// Mounted reports whether a file system is mounted on dir, from
// /proc/self/mountinfo. A FUSE mount whose daemon died is still mounted.
func Mounted(dir string) (bool, error) {
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, mi := range infos {
		if mi.MountPoint == dir {
			return true, nil
		}
	}
	return false, nil
}
