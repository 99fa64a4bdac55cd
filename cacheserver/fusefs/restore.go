package fusefs

import (
	"context"
	"errors"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// restoreWait bounds how long a rename over a file it hid, which then
// failed, tries to give the file its name back before it returns: the
// servers hold every call that takes a path meanwhile (holdNames). The
// mount goes on trying after that (restoreLater). A variable for tests.
var restoreWait = time.Second

// restoreEvery is how often the mount tries again to give a file its name
// back once restoreWait has passed. A variable for tests.
var restoreEvery = time.Second

// restoral is what an attempt to give a hidden file its name back found.
type restoral int

const (
	// restored: the file has its name back.
	restored restoral = iota
	// replaced: the rename took place after all (its answer was lost with
	// a connection): the file was replaced, and stays hidden until its
	// last release removes it, as after a rename that succeeded.
	replaced
	// unrestorable: the name stands for another file while the one renamed
	// over it is still there, or the hidden name is gone: the file keeps
	// its hidden name, and nothing removes it.
	unrestorable
	// unreached: the servers did not answer; try again.
	unreached
)

// unhide gives n, hidden in parent to make way for a rename of oldPath
// over name that failed, its name back, and reports whether the rename
// took place after all. A server that cannot be reached (it crashed, and
// may be restarting) is asked again for up to restoreWait, and then in the
// background: until the file has its name back it keeps its hidden name,
// and its last release does not remove it, since the rename did not
// replace it.
func (n *node) unhide(ctx context.Context, parent *node, name, oldPath string) (renamed bool) {
	h := n.hiddenAt.Load()
	if h == nil {
		return false
	}
	var r restoral
	_ = untilAnswered(func() error {
		r = n.restore(ctx, parent, name, oldPath, h)
		if r == unrestorable {
			n.strand()
			if !n.keep(ctx, parent, name, h) {
				r = unreached
			}
		}
		if r == unreached {
			return syscall.EAGAIN
		}
		return nil
	})
	switch r {
	case replaced:
		return true
	case unreached:
		n.strand()
		n.m.log.Warn("Cannot give a file hidden for a failed rename its name back yet; trying again in the background",
			"path", parent.child(name), "hidden", parent.child(h.name))
		go n.restoreLater(context.WithoutCancel(ctx), parent, name, oldPath, h)
	}
	return false
}

// unanswered takes n for hidden in parent as hidden, for a rename of
// oldPath over name that fails since the servers could not be reached to
// hide it: the move may have taken place, its answer lost with a
// connection, and a failed rename must change nothing. The mount gives the
// file its name back once a server answers (restoreLater), and finds it
// there if the move did not take place. Its last release leaves it alone.
func (n *node) unanswered(ctx context.Context, parent *node, name, hidden, oldPath string) {
	h := &hiddenName{dir: parent, name: hidden}
	parent.MvChild(name, parent.EmbeddedInode(), hidden, true)
	n.hiddenAt.Store(h)
	n.m.log.Warn("Cannot tell whether a file that a rename was to replace was given a hidden name, since the servers could not be reached; the rename fails, and the file gets its name back in the background",
		"path", parent.child(name), "hidden", parent.child(hidden))
	go n.restoreLater(context.WithoutCancel(ctx), parent, name, oldPath, h)
}

// strand keeps n under its hidden name for good, or until restoreLater
// gives it its name back: its last release leaves it alone.
func (n *node) strand() {
	n.mu.Lock()
	n.hidden = false
	n.mu.Unlock()
}

// restoreLater tries to give n, stranded under its hidden name h, its name
// back every restoreEvery until it can, or until the mount stops.
func (n *node) restoreLater(ctx context.Context, parent *node, name, oldPath string, h *hiddenName) {
	t := time.NewTicker(restoreEvery)
	defer t.Stop()
	for {
		select {
		case <-n.m.stopped:
			n.m.log.Error("A file hidden for a rename that failed keeps its hidden name: the servers could not be reached before the mount stopped; the teardown of the instance gives the file its name back if the file the rename was to move is still where it was, and removes it otherwise",
				"path", parent.child(name), "hidden", parent.child(h.name))
			return
		case <-t.C:
		}
		release := n.m.holdNames()
		r := n.restore(ctx, parent, name, oldPath, h)
		if r == replaced || r == unrestorable {
			// The name stands for another file now, even the one renamed:
			// the caller was told the rename failed, and this file is
			// still theirs.
			if !n.keep(ctx, parent, name, h) {
				r = unreached
			}
		}
		release(false, nil, nil, "")
		if r == restored {
			n.m.log.Info("Gave a file hidden for a rename that failed its name back", "path", parent.child(name))
		}
		if r != unreached {
			return
		}
	}
}

// keep moves n, stranded under its hidden name h, to a name its owner can
// see beside name (namespace.KeptInfix), and reports whether it could.
func (n *node) keep(ctx context.Context, parent *node, name string, h *hiddenName) bool {
	kept := namespace.KeptName(name, rand.Uint64())
	if err := n.m.fsys.Rename(ctx, parent.child(h.name), parent.child(kept), renameNoReplace); err != nil {
		n.m.log.Error("A file hidden for a rename that failed cannot have its name back, nor another; it keeps its hidden name",
			"path", parent.child(name), "hidden", parent.child(h.name), "err", err)
		return !unreachable(err)
	}
	parent.MvChild(h.name, parent.EmbeddedInode(), kept, true)
	n.hiddenAt.Store(nil)
	n.m.log.Error("A file hidden for a rename that failed cannot have its name back, which another file took; it is kept under another name",
		"path", parent.child(name), "kept", parent.child(kept))
	return true
}

// restore makes one attempt to give n, hidden as h for a rename of oldPath
// over name in parent, its name back. The caller holds names (holdNames).
func (n *node) restore(ctx context.Context, parent *node, name, oldPath string, h *hiddenName) restoral {
	err := n.m.fsys.Rename(ctx, parent.child(h.name), parent.child(name), renameNoReplace)
	switch {
	case err == nil:
	case errors.Is(err, syscall.EEXIST):
		// The name stands for a file again: the one renamed, if the
		// rename took place after all and its answer got lost, and then
		// oldPath is gone; or one that another mount made meanwhile.
		_, err := n.m.fsys.GetAttr(ctx, oldPath)
		switch {
		case errors.Is(err, syscall.ENOENT):
			return replaced
		case err != nil && unreachable(err):
			return unreached
		}
		return unrestorable
	case errors.Is(err, syscall.ENOENT):
		// The hidden name is gone: an attempt whose answer got lost may
		// have given the file its name back.
		a, err := n.m.fsys.GetAttr(ctx, parent.child(name))
		switch {
		case err != nil && unreachable(err):
			return unreached
		case err != nil || a.Ino != n.StableAttr().Ino:
			return unrestorable
		}
	case unreachable(err):
		return unreached
	default:
		n.m.log.Warn("Restoring a file hidden for a failed rename failed", "path", parent.child(h.name), "err", err)
		return unrestorable
	}
	parent.MvChild(h.name, parent.EmbeddedInode(), name, true)
	n.hiddenAt.Store(nil)
	n.mu.Lock()
	n.hidden = false
	n.mu.Unlock()
	return restored
}

// untilAnswered runs call, and again while its error says that the
// servers could not be reached (unreachable), for up to restoreWait, and
// returns its last error: a server that crashed may be back by then.
func untilAnswered(call func() error) error {
	deadline := time.Now().Add(restoreWait)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := call()
		if err == nil || !unreachable(err) || !time.Now().Add(wait).Before(deadline) {
			return err
		}
		time.Sleep(wait)
	}
}

// unreachable reports whether err may say that the servers could not be
// reached, or that the answer got lost, rather than answer about a file: a
// call that failed so may be made again.
func unreachable(err error) bool {
	for _, e := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EHOSTUNREACH,
		syscall.ENETUNREACH, syscall.ETIMEDOUT, syscall.ENOTCONN, syscall.EPIPE, syscall.EIO, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
