package local

import (
	"slices"
	"strconv"
)

// Settings are what an instance was started with and keeps for its life:
// its servers' cache directories hold data cached and written under them,
// so Up over a surviving state starts the servers again with their stored
// arguments, whatever the new Config says.
type Settings struct {
	// Servers is the number of servers.
	Servers int
	// Capacity is each server's share of the capacity.
	Capacity int64
	// ExtentSize is the striping unit.
	ExtentSize int64
	// UID and GID are the identity of backing-store operations, or -1
	// when none was given.
	UID, GID int
	// ActAsCaller says the servers act as each caller.
	ActAsCaller bool
	// ServerArgs are the extra flags of every server.
	ServerArgs []string
}

// fixedServerFlags are the flags, each with a value, that fresh puts first
// on a server's command line; the optional identity flags follow, then
// refuseUnaddressed, then Config.ServerArgs.
var fixedServerFlags = []string{
	"--listen", "--control", "--backing", "--cache-dir", "--capacity", "--extent-size", "--index", "--servers", "--secret-file",
}

// refuseUnaddressed is the flag, after the optional identity flags, that
// makes a server refuse control calls that do not name it.
const refuseUnaddressed = "--refuse-unaddressed-calls"

// Settings returns the settings of st, read from the command line of its
// first server as fresh wrote it.
func (st *State) Settings() Settings {
	set := Settings{Servers: len(st.Servers), ExtentSize: st.ExtentSize, UID: -1, GID: -1}
	if len(st.Servers) == 0 {
		return set
	}
	args := st.Servers[0].Args[1:] // after "server"
	for len(args) > 1 && slices.Contains(fixedServerFlags, args[0]) {
		if args[0] == "--capacity" {
			set.Capacity, _ = strconv.ParseInt(args[1], 10, 64)
		}
		args = args[2:]
	}
	args = optionalID(args, "--uid", &set.UID)
	args = optionalID(args, "--gid", &set.GID)
	if len(args) > 0 && args[0] == "--act-as-caller" {
		set.ActAsCaller, args = true, args[1:]
	}
	// States of earlier releases lack it; it is no setting of the user's.
	if len(args) > 0 && args[0] == refuseUnaddressed {
		args = args[1:]
	}
	if len(args) > 0 {
		set.ServerArgs = slices.Clone(args)
	}
	return set
}

// MountRunning reports whether the mount process of st runs, so that Up
// leaves it as it is, with the flags it was started with (MountArgs); bin
// is the burstcache binary, as for Up.
func (st *State) MountRunning(bin string) bool { return alive(st.MountPID, st.MountStart, bin) }

// optionalID reads flag and its value into id if args start with them, and
// returns the rest.
func optionalID(args []string, flag string, id *int) []string {
	if len(args) < 2 || args[0] != flag {
		return args
	}
	if n, err := strconv.Atoi(args[1]); err == nil {
		*id = n
	}
	return args[2:]
}
