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
//
// The context is not cancelled when the kernel interrupts the request: it
// does that whenever the caller's thread takes a signal it handles (the Go
// runtime signals its threads all the time), and a call given up answers
// EINTR, which programs do not expect from stat(2), listxattr(2) or
// getdents(2) on a file system. As on a local file system or a hard NFS
// mount, only a fatal signal cuts a call short, and the kernel does that
// without asking the mount.
func (c *callers) context(ctx context.Context) context.Context {
	fc, ok := fuse.FromContext(ctx)
	ctx = context.WithoutCancel(ctx)
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

// idMapFiles are the files of a process's /proc directory that hold the
// uid and gid maps of its user namespace.
var idMapFiles = [2]string{"/uid_map", "/gid_map"}

// ownIDMaps are the uid and gid maps of the mount's user namespace.
var ownIDMaps = sync.OnceValues(func() ([2][]byte, error) {
	var maps [2][]byte
	for i, name := range idMapFiles {
		b, err := os.ReadFile("/proc/self" + name)
		if err != nil {
			return maps, err
		}
		maps[i] = b
	}
	return maps, nil
})

// sameUserNamespace reports whether the process of /proc directory dir is
// in a user namespace that maps every uid and gid as the mount's does: its
// capabilities then count on every file as the kernel counts them
// (capable_wrt_inode_uidgid). The maps are read rather than the
// /proc/PID/ns/user link, whose lookup waits for an execve of the process
// to end, and an execve may be what waits for this request. A map that
// cannot be read says no, unless the kernel has none.
//
// Every request of a caller with capabilities asks this, so the maps are
// read with bare system calls into a buffer on the stack: through os.File,
// which also asks for the file's size and tries to register it with the
// poller, the two reads cost about a seventh of the CPU time of a lookup.
func sameUserNamespace(dir string) bool {
	own, err := ownIDMaps()
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	for i, name := range idMapFiles {
		if !fileHolds(dir+name, own[i]) {
			return false
		}
	}
	return true
}

// fileHolds reports whether the file at p holds exactly want.
func fileHolds(p string, want []byte) bool {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var buf [512]byte
	for {
		n, err := unix.Read(fd, buf[:min(len(buf), len(want)+1)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false
		case n == 0:
			return len(want) == 0
		case n > len(want) || !bytes.Equal(buf[:n], want[:n]):
			return false
		}
		want = want[n:]
	}
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
