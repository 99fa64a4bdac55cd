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

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// groupsTTL bounds how long the supplementary groups and capabilities of a
// process are trusted after they were read; a process rarely changes them,
// and a pid reused by another process within this time with the same uid
// and gid is the only way to see stale ones.
const groupsTTL = time.Second

// callers caches the supplementary groups and capabilities of calling
// processes.
type callers struct {
	mu      sync.Mutex
	entries map[callerKey]groupsEntry
}

type callerKey struct{ pid, uid, gid uint32 }

type groupsEntry struct {
	groups  []uint32
	caps    ident.Caps
	hasCaps bool
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

// cred returns the caller's identity, its groups and capabilities from the
// cache or /proc.
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
		e = procCred(fc.Pid)
		e.expires = now.Add(groupsTTL)
		c.mu.Lock()
		if c.entries == nil || len(c.entries) > 4096 {
			c.entries = map[callerKey]groupsEntry{}
		}
		c.entries[key] = e
		c.mu.Unlock()
	}
	cred.Groups, cred.Caps, cred.HasCaps = e.groups, e.caps, e.hasCaps
	return cred
}

// procCred reads the supplementary groups and effective capabilities of
// thread pid (the kernel names the calling thread, and capabilities
// belong to threads). A thread that is gone gets neither: no privilege is
// granted on a guess, even to uid 0, which may have dropped its
// capabilities.
//
// A thread in a user namespace other than the mount's gets no
// capabilities either: CapEff counts in the thread's own namespace, where
// any user may be root with all of them (unshare -Ur), and the kernel lets
// them override no check on a file whose owner that namespace does not map.
// The servers cannot tell such files apart, so they grant none.
func procCred(pid uint32) groupsEntry {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return groupsEntry{hasCaps: true}
	}
	e := groupsEntry{groups: parseGroups(b), hasCaps: true}
	if sameUserNamespace(dir) {
		e.caps, _ = ident.ParseCapEff(b)
	}
	return e
}

// ownUserNamespace is the user namespace of the mount's process.
var ownUserNamespace = sync.OnceValues(func() (os.FileInfo, error) { return os.Stat("/proc/self/ns/user") })

// sameUserNamespace reports whether the process of /proc directory dir is
// in the user namespace of the mount's process. A namespace that cannot be
// read says no, unless the kernel has none (no /proc/self/ns/user).
func sameUserNamespace(dir string) bool {
	own, err := ownUserNamespace()
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	theirs, err := os.Stat(dir + "/ns/user")
	return err == nil && os.SameFile(own, theirs)
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
