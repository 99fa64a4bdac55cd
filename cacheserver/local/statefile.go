package local

import (
	"encoding/json"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// The state file holds the directories of the instance and the arguments
// of its processes byte for byte (see control.Path): any of the
// directories may have a name that is not UTF-8, which a plain string
// would record with U+FFFD in its place, so that the next up over the
// cache directory would take the instance for another, and status and down
// would look for another mount point. A state of only UTF-8 names reads as
// it did; a binary that reads names only as strings refuses the others.

// stateFile is State as the state file holds it.
type stateFile struct {
	Backing    control.Path   `json:"backing"`
	Mount      control.Path   `json:"mount"`
	CacheDir   control.Path   `json:"cacheDir"`
	ExtentSize int64          `json:"extentSize"`
	Servers    []ServerState  `json:"servers"`
	MountPID   int            `json:"mountPID"`
	MountStart uint64         `json:"mountStart,omitempty"`
	MountArgs  []control.Path `json:"mountArgs"`
}

// serverFile is ServerState as the state file holds it.
type serverFile struct {
	Index           int              `json:"index"`
	Data            control.Path     `json:"data"`
	Control         string           `json:"control"`
	PID             int              `json:"pid"`
	Start           uint64           `json:"start,omitempty"`
	Args            []control.Path   `json:"args"`
	ControlProtocol control.Protocol `json:"controlProtocol,omitempty"`
}

// MarshalJSON writes st with its names byte for byte.
func (st State) MarshalJSON() ([]byte, error) {
	return json.Marshal(stateFile{
		Backing: control.Path(st.Backing), Mount: control.Path(st.Mount), CacheDir: control.Path(st.CacheDir),
		ExtentSize: st.ExtentSize, Servers: st.Servers, MountPID: st.MountPID, MountStart: st.MountStart,
		MountArgs: paths(st.MountArgs),
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (st *State) UnmarshalJSON(b []byte) error {
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*st = State{
		Backing: string(f.Backing), Mount: string(f.Mount), CacheDir: string(f.CacheDir),
		ExtentSize: f.ExtentSize, Servers: f.Servers, MountPID: f.MountPID, MountStart: f.MountStart,
		MountArgs: strs(f.MountArgs),
	}
	return nil
}

// MarshalJSON writes s with its names byte for byte.
func (s ServerState) MarshalJSON() ([]byte, error) {
	return json.Marshal(serverFile{Index: s.Index, Data: control.Path(s.Data), Control: s.Control,
		PID: s.PID, Start: s.Start, Args: paths(s.Args), ControlProtocol: s.ControlProtocol})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *ServerState) UnmarshalJSON(b []byte) error {
	var f serverFile
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = ServerState{Index: f.Index, Data: string(f.Data), Control: f.Control,
		PID: f.PID, Start: f.Start, Args: strs(f.Args), ControlProtocol: f.ControlProtocol}
	return nil
}

func paths(ss []string) []control.Path {
	if ss == nil {
		return nil
	}
	ps := make([]control.Path, len(ss))
	for i, s := range ss {
		ps[i] = control.Path(s)
	}
	return ps
}

func strs(ps []control.Path) []string {
	if ps == nil {
		return nil
	}
	ss := make([]string, len(ps))
	for i, p := range ps {
		ss[i] = string(p)
	}
	return ss
}
