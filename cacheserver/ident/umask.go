package ident

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

type umaskKey struct{}

// WithUmask returns a context that carries umask, the file mode creation
// mask of the process that asked for a creation, for DoUmask.
func WithUmask(ctx context.Context, umask uint32) context.Context {
	return context.WithValue(ctx, umaskKey{}, umask&0o777)
}

// UmaskFromContext returns the umask stored in ctx, if any.
func UmaskFromContext(ctx context.Context) (uint32, bool) {
	u, ok := ctx.Value(umaskKey{}).(uint32)
	return u, ok
}

// DoUmask runs fn as Do does, with umask as the file mode creation mask of
// the thread that runs it. The kernel then gives what fn creates the mode
// it would give the caller's own creation: the mode asked for less umask,
// or, under a directory with a default ACL, which makes the kernel ignore
// the umask, the mode and access ACL that the default ACL gives. No mode
// can be fixed afterwards instead: a chmod would overwrite the mask entry
// of the ACL that the kernel derived.
//
// The umask belongs to the file-system context that every thread of the
// process shares, so a umask other than the process's is set on a thread
// that first takes a context of its own (unshare(CLONE_FS)); that thread is
// never handed back to the Go runtime, which destroys it when fn returns.
// A umask equal to the process's costs nothing more than Do.
func DoUmask(c Cred, umask uint32, fn func() error) error {
	umask &= 0o777
	if pu, ok := processUmask(); ok && pu == umask {
		return Do(c, fn)
	}
	done := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the thread leaves with the goroutine.
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_FS); err != nil {
			done <- err
			return
		}
		syscall.Umask(int(umask))
		if !c.IsProcess() {
			if _, err := switchTo(c); err != nil {
				done <- err
				return
			}
		}
		done <- fn()
	}()
	return <-done
}

// processUmask returns the umask of the process, read once from
// /proc/self/status (Linux 4.7 and later): the servers never change it, and
// reading it with umask(2) would change it for a moment under every thread.
var processUmask = sync.OnceValues(func() (uint32, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	return parseUmask(b)
})

// parseUmask extracts the "Umask:" line of a /proc/PID/status file.
func parseUmask(status []byte) (uint32, bool) {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("Umask:"))
		if !ok {
			continue
		}
		u, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 8, 32)
		return uint32(u) & 0o777, err == nil
	}
	return 0, false
}
