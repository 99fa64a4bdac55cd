package fusefs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// groupsTTL bounds how long the supplementary groups of a process are
// trusted after they were read; a process rarely changes them, and a pid
// reused by another process within this time with the same uid and gid is
// the only way to see stale ones. Capabilities are not cached: a process
// that drops them keeps its pid and uid, and hands them on through exec
// (setpriv, capsh) to none of its code, so they are asked of the kernel
// (capget) at each request.
const groupsTTL = time.Second

// callers caches the supplementary groups of calling processes.
type callers struct {
	mu      sync.Mutex
	entries map[callerKey]groupsEntry
}

type callerKey struct{ pid, uid, gid uint32 }

type groupsEntry struct {
	groups  []uint32
	expires time.Time
}

// context returns ctx with the identity of the FUSE request's caller.
func (c *callers) context(ctx context.Context) context.Context {
	fc, ok := fuse.FromContext(ctx)
	if !ok {
		return ctx
	}
	return ident.NewContext(ctx, c.cred(fc))
}

// cred returns the caller's identity: its groups from the cache or /proc,
// its capabilities from the kernel.
func (c *callers) cred(fc *fuse.Caller) ident.Cred {
	cred := ident.Cred{UID: fc.Uid, GID: fc.Gid}
	if fc.Pid == 0 {
		return cred
	}
	key := callerKey{fc.Pid, fc.Uid, fc.Gid}
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		e = groupsEntry{groups: procGroups(fc.Pid), expires: now.Add(groupsTTL)}
		c.mu.Lock()
		if c.entries == nil || len(c.entries) > 4096 {
			c.entries = map[callerKey]groupsEntry{}
		}
		c.entries[key] = e
		c.mu.Unlock()
	}
	cred.Groups, cred.Caps, cred.HasCaps = e.groups, callerCaps(fc.Pid), true
	return cred
}

// procGroups reads the supplementary groups of thread pid (the kernel
// names the calling thread). A thread that is gone has none.
func procGroups(pid uint32) []uint32 {
	b, err := os.ReadFile(procDir(pid) + "/status")
	if err != nil {
		return nil
	}
	return parseGroups(b)
}

func procDir(pid uint32) string { return "/proc/" + strconv.FormatUint(uint64(pid), 10) }

// callerCaps returns the effective capabilities among ident.FSCaps of
// thread pid (capabilities belong to threads). A thread that is gone has
// none: no privilege is granted on a guess, even to uid 0, which may have
// dropped its capabilities.
//
// A thread in a user namespace other than the mount's has none either:
// its capabilities count in its own namespace, where any user may be root
// with all of them (unshare -Ur), and the kernel lets them override no
// check on a file whose owner that namespace does not map. The servers
// cannot tell such files apart, so they grant none.
func callerCaps(pid uint32) ident.Caps {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3, Pid: int32(pid)}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0
	}
	caps := (ident.Caps(data[0].Effective) | ident.Caps(data[1].Effective)<<32) & ident.FSCaps
	if caps == 0 || !sameUserNamespace(procDir(pid)) {
		return 0
	}
	return caps
}

// ownIDMaps are the uid and gid maps of the mount's user namespace.
var ownIDMaps = sync.OnceValues(func() ([]byte, error) { return idMaps("/proc/self") })

// idMaps returns the uid and gid maps of the user namespace of the process
// of /proc directory dir, as the mount's namespace sees them.
func idMaps(dir string) ([]byte, error) {
	u, err := os.ReadFile(dir + "/uid_map")
	if err != nil {
		return nil, err
	}
	g, err := os.ReadFile(dir + "/gid_map")
	return append(append(u, 0), g...), err
}

// sameUserNamespace reports whether the process of /proc directory dir is
// in a user namespace that maps every uid and gid as the mount's does: its
// capabilities then count on every file as the kernel counts them
// (capable_wrt_inode_uidgid). The maps are read rather than the
// /proc/PID/ns/user link, whose lookup waits for an execve of the process
// to end, and an execve may be what waits for this request. A map that
// cannot be read says no, unless the kernel has none.
func sameUserNamespace(dir string) bool {
	own, err := ownIDMaps()
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	theirs, err := idMaps(dir)
	return err == nil && bytes.Equal(own, theirs)
}

// parseGroups extracts the "Groups:" line of a /proc/PID/status file.
func parseGroups(status []byte) []uint32 {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("Groups:"))
		if !ok {
			continue
		}
		var groups []uint32
		for f := range bytes.FieldsSeq(rest) {
			if g, err := strconv.ParseUint(string(f), 10, 32); err == nil {
				groups = append(groups, uint32(g))
			}
		}
		return groups
	}
	return nil
}
