package driver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/burstcache/burstcache/csi-driver/mounter"
)

// volumesDir is the directory of StateDir that holds one directory per
// staged volume, named <namespace>_<instance> (neither may contain "_").
const volumesDir = "volumes"

// stateFile is the file, in a volume's directory, that records the volume.
const stateFile = "state.json"

// volumeState is what the plugin records of a staged volume, as JSON in
// <StateDir>/volumes/<namespace>_<instance>/state.json. The same directory
// is the mount's state directory (mounter.Spec.Dir).
type volumeState struct {
	// VolumeID is the CSI volume ID.
	VolumeID string `json:"volumeID"`
	// Mount is the FUSE mount at the staging path.
	Mount mounter.Spec `json:"mount"`
	// Targets are the places the volume is published at, by target path.
	Targets map[string]publication `json:"targets,omitempty"`
	// Unstaging is set once an unstage has asked the daemon to stop: the
	// watcher must not bring it back, and a daemon that ended without
	// publishing keeps the volume (and its Lease) until an admin looks.
	Unstaging bool `json:"unstaging,omitempty"`
}

// publication is one NodePublishVolume of a volume.
type publication struct {
	SubPath  string `json:"subPath,omitempty"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Pod is the "pod/volume" entry of the Lease's pod list, if known.
	Pod string `json:"pod,omitempty"`
}

// volumeDir returns the state directory of a volume.
func (n *nodeServer) volumeDir(namespace, instance string) string {
	return filepath.Join(n.opts.StateDir, volumesDir, namespace+"_"+instance)
}

// loadState returns the recorded state of the volume in dir, or nil if it
// is not staged.
func loadState(dir string) (*volumeState, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading volume state: %w", err)
	}
	st := &volumeState{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("reading volume state %s: %w", dir, err)
	}
	if st.Targets == nil {
		st.Targets = map[string]publication{}
	}
	return st, nil
}

// save records the state atomically: a crash leaves the old or the new
// record, never a torn one.
func (st *volumeState) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(st.Mount.Dir, stateFile)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("writing volume state: %w", err)
	}
	return os.Rename(path+".tmp", path)
}

// pods returns the sorted, distinct pod entries of the volume's targets.
func (st *volumeState) pods() []string {
	seen := map[string]bool{}
	var pods []string
	for _, p := range st.Targets {
		if p.Pod != "" && !seen[p.Pod] {
			seen[p.Pod] = true
			pods = append(pods, p.Pod)
		}
	}
	sort.Strings(pods)
	return pods
}

// stagedVolumes returns the state directories of all volumes recorded in
// the state directory.
func (n *nodeServer) stagedVolumes() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(n.opts.StateDir, volumesDir))
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && strings.Contains(e.Name(), "_") {
			dirs = append(dirs, filepath.Join(n.opts.StateDir, volumesDir, e.Name()))
		}
	}
	return dirs, nil
}
