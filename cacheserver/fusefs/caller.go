package fusefs

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// groupsTTL bounds how long the supplementary groups of a process are
// trusted after they were read; a process rarely changes them, and a pid
// reused by another process within this time with the same uid and gid is
// the only way to see stale groups.
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

// cred returns the caller's identity, its groups from the cache or /proc.
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
	if ok && now.Before(e.expires) {
		cred.Groups = e.groups
		return cred
	}
	cred.Groups = procGroups(fc.Pid)
	c.mu.Lock()
	if c.entries == nil || len(c.entries) > 4096 {
		c.entries = map[callerKey]groupsEntry{}
	}
	c.entries[key] = groupsEntry{cred.Groups, now.Add(groupsTTL)}
	c.mu.Unlock()
	return cred
}

// procGroups reads the supplementary groups of process pid, none if the
// process is gone.
func procGroups(pid uint32) []uint32 {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	return parseGroups(b)
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
