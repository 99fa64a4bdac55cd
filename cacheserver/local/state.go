package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/durable"
)

// ErrNotUp is returned for a mount point with no local instance.
var ErrNotUp = errors.New("no local burstcache instance at this mount point")

// State is what a local instance records about itself.
type State struct {
	Backing    string
	Mount      string
	CacheDir   string
	ExtentSize int64
	Servers    []ServerState
	MountPID   int
	// MountStart is when the mount process started, in clock ticks since
	// boot, which tells it from a process that reused its pid.
	MountStart uint64
	MountArgs  []string
}

// ServerState is one server process.
type ServerState struct {
	Index   int
	Data    string
	Control string
	PID     int
	// Start is when the server process started (see State.MountStart).
	Start uint64
	Args  []string
	// ControlProtocol is the protocol of the server's control API, as the
	// binary that started it speaks it. A state written by a binary before
	// this field speaks control.ProtocolSignedCalls: its servers sign no
	// answers, and a down with a newer binary must still reach them.
	ControlProtocol control.Protocol
}

// pointer names the cache directory of the instance mounted at a mount point.
type pointer struct {
	CacheDir control.Path `json:"cacheDir"`
}

func pointerDir() string {
	const run = "/run/burstcache"
	if err := os.MkdirAll(run, 0o755); err == nil {
		return run
	}
	return filepath.Join(os.TempDir(), "burstcache-run")
}

func pointerPath(mount string) string {
	sum := sha256.Sum256([]byte(mount))
	return filepath.Join(pointerDir(), hex.EncodeToString(sum[:8])+".json")
}

// DefaultCacheDir is the cache directory of a mount point when none is given.
func DefaultCacheDir(mount string) string {
	sum := sha256.Sum256([]byte(mount))
	return filepath.Join("/var/tmp/burstcache", hex.EncodeToString(sum[:8]))
}

func statePath(cacheDir string) string { return filepath.Join(cacheDir, "local.json") }

// Load returns the state of the instance mounted at mount (an absolute
// path), or ErrNotUp.
func Load(mount string) (*State, error) {
	var p pointer
	if err := readJSON(pointerPath(mount), &p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotUp, mount)
		}
		return nil, err
	}
	return loadDir(string(p.CacheDir))
}

// LoadDir returns the state that the cache directory holds, or ErrNotUp.
func LoadDir(cacheDir string) (*State, error) { return loadDir(cacheDir) }

func loadDir(cacheDir string) (*State, error) {
	var st State
	if err := readJSON(statePath(cacheDir), &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no state in %s", ErrNotUp, cacheDir)
		}
		return nil, err
	}
	return &st, nil
}

// save writes the state and the pointer to it.
func (st *State) save() error {
	if err := writeJSON(statePath(st.CacheDir), st); err != nil {
		return err
	}
	return writeJSON(pointerPath(st.Mount), pointer{CacheDir: control.Path(st.CacheDir)})
}

// forget removes the state, and the pointer if it points to this state.
func (st *State) forget() error {
	var p pointer
	if readJSON(pointerPath(st.Mount), &p) == nil && string(p.CacheDir) == st.CacheDir {
		_ = os.Remove(pointerPath(st.Mount))
	}
	err := os.Remove(statePath(st.CacheDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// writeJSON writes v to path durably: a crash leaves the old file or the
// new one, whole.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(path, append(b, '\n'), 0o600)
}
