package ident

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrSwitch is returned when the thread's identity could not be switched, for
// example because the process lacks CAP_SETUID or CAP_SETGID.
var ErrSwitch = errors.New("cannot switch file-system identity")

// Cred is an identity: the uid, gid, supplementary groups and capabilities
// under which file-system operations run.
type Cred struct {
	UID    uint32
	GID    uint32
	Groups []uint32
	// Caps are the effective capabilities of the caller, of which those in
	// FSCaps count, when HasCaps says that they are known. A Cred without
	// them has what its uid gives (EffectiveCaps): a peer of an earlier
	// release sends none.
	Caps    Caps
	HasCaps bool
}

// String formats c as uid:gid[+groups][/caps], the capabilities in hex
// when they differ from what the uid gives.
func (c Cred) String() string {
	s := fmt.Sprintf("%d:%d", c.UID, c.GID)
	if len(c.Groups) > 0 {
		s += fmt.Sprintf("+%v", c.Groups)
	}
	if eff := c.EffectiveCaps(); eff != (Cred{UID: c.UID}).EffectiveCaps() {
		s += fmt.Sprintf("/%#x", uint64(eff))
	}
	return s
}

// Process returns the identity of the current process. Its capabilities
// are left to its uid (HasCaps is false), so that a Cred made from it for
// another uid, as a server's configured identity is, never carries root's.
// A thread that acts as it has the capabilities of the process, which
// bound those of any identity it switches to anyway.
func Process() Cred {
	groups, _ := os.Getgroups()
	c := Cred{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
	for _, g := range groups {
		c.Groups = append(c.Groups, uint32(g))
	}
	return c
}

type ctxKey struct{}

// NewContext returns a context that carries c as the identity of the caller.
func NewContext(ctx context.Context, c Cred) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the caller's identity stored in ctx, if any.
func FromContext(ctx context.Context) (Cred, bool) {
	c, ok := ctx.Value(ctxKey{}).(Cred)
	return c, ok
}

// DoContext runs fn as the identity carried by ctx, or as the process itself
// when ctx carries none.
func DoContext(ctx context.Context, fn func() error) error {
	c, ok := FromContext(ctx)
	if !ok {
		return fn()
	}
	return Do(c, fn)
}

// Do runs fn with the file-system identity c. fn must do its file-system
// calls on the calling goroutine and must not start goroutines that touch the
// file system, since only the thread running fn carries the identity. When c
// is the identity of the process, fn runs directly.
func Do(c Cred, fn func() error) error {
	if c.IsProcess() {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		// A fresh goroutine, locked to its thread for the whole call: if the
		// identity cannot be restored, the goroutine exits still locked and the
		// Go runtime destroys the thread instead of reusing it.
		runtime.LockOSThread()
		prev, err := switchTo(c)
		if err != nil {
			done <- err
			return
		}
		err = fn()
		if rerr := restore(prev); rerr != nil {
			done <- errors.Join(err, rerr)
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// IsProcess reports whether c passes the same permission checks as the
// identity of the current process.
func (c Cred) IsProcess() bool { return sameIdentity(c, Process()) }

// sameIdentity reports whether a and b pass the same permission checks: the
// kernel counts the primary group as a member of the group list, so a
// process whose groups repeat its gid (as container runtimes set them) is
// the identity of a Cred that lists no groups.
func sameIdentity(a, b Cred) bool {
	return a.UID == b.UID && a.GID == b.GID && slices.Equal(memberOf(a), memberOf(b)) &&
		a.EffectiveCaps() == b.EffectiveCaps()
}

// memberOf returns the sorted, distinct groups c belongs to, its gid included.
func memberOf(c Cred) []uint32 {
	gs := append([]uint32{c.GID}, c.Groups...)
	slices.Sort(gs)
	return slices.Compact(gs)
}

// thread is the file-system identity of a thread, as switchTo found it.
type thread struct {
	cred Cred
	caps [2]unix.CapUserData
}

// switchTo sets the calling thread's groups, fsgid, fsuid and effective
// capabilities to c and returns what it had before. The raw system calls
// act on this thread only, unlike syscall.Setgroups, which changes every
// thread of the process.
//
// The capabilities are set last: setfsuid raises the file-system
// capabilities of a thread whose fsuid becomes 0 and drops them when it
// leaves 0, which would undo a set made before. The thread keeps the
// capabilities outside FSCaps, and of FSCaps it gets those that c holds
// and the thread held before: never one that the server lacks.
func switchTo(c Cred) (thread, error) {
	caps, err := threadCaps()
	prev := thread{cred: Cred{UID: fsuid(), GID: fsgid(), Groups: threadGroups()}, caps: caps}
	if err != nil {
		return prev, fmt.Errorf("%w: %w", ErrSwitch, err)
	}
	if err := switchIDs(c); err != nil {
		return prev, err
	}
	was := effective(caps)
	if err := setEffective(caps, was&^FSCaps|was&c.EffectiveCaps()); err != nil {
		return prev, fmt.Errorf("%w: to %s: %w", ErrSwitch, c, err)
	}
	return prev, nil
}

// restore gives the calling thread back the identity that switchTo found.
func restore(t thread) error {
	if err := switchIDs(t.cred); err != nil {
		return err
	}
	if err := setEffective(t.caps, effective(t.caps)); err != nil {
		return fmt.Errorf("%w: back to %s: %w", ErrSwitch, t.cred, err)
	}
	return nil
}

// switchIDs sets the calling thread's groups, fsgid and fsuid to those of c.
func switchIDs(c Cred) error {
	if err := setThreadGroups(c.Groups); err != nil {
		return fmt.Errorf("%w: setgroups %v: %w", ErrSwitch, c.Groups, err)
	}
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(c.GID), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	// setfsuid and setfsgid report no errors; reading the values back is the
	// only way to know that the switch happened.
	if fsuid() != c.UID || fsgid() != c.GID {
		return fmt.Errorf("%w: to %s", ErrSwitch, c)
	}
	return nil
}

// fsuid returns the calling thread's fsuid: setfsuid with an invalid id
// changes nothing and returns the current value.
func fsuid() uint32 {
	r, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
	return uint32(r)
}

func fsgid() uint32 {
	r, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0)
	return uint32(r)
}

func threadGroups() []uint32 {
	n, _, _ := syscall.RawSyscall(syscall.SYS_GETGROUPS, 0, 0, 0)
	if int(n) <= 0 {
		return nil
	}
	gs := make([]uint32, n)
	n, _, _ = syscall.RawSyscall(syscall.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&gs[0])), 0)
	return gs[:n]
}

func setThreadGroups(gs []uint32) error {
	var p unsafe.Pointer
	if len(gs) > 0 {
		p = unsafe.Pointer(&gs[0])
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(gs)), uintptr(p), 0); e != 0 {
		return e
	}
	return nil
}
