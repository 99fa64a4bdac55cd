package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// A symbolic link never changes its target, so the mount reads a link once
// per node: with its attributes, in one look at it (namespace.LinkReader),
// at the lookup that finds it. The kernel reads a link at every path walk
// through it, and the node answers without a call. Reading the link by its
// path later instead would find whatever the path names by then: a rename
// that put a file there would answer EINVAL to a walk that found a link,
// another link its target in the place of the link found. The target
// serves while the attributes of n keep the inode number and change time
// of the link read (a new link under a reused number has a change time of
// its own).

// linkTarget is the target of a link with the attributes it was read with.
type linkTarget struct {
	target string
	ino    uint64
	ctime  time.Time
}

// of reports whether a are attributes of the link l was read from.
func (l *linkTarget) of(a namespace.Attr) bool {
	return a.Ino == l.ino && a.Ctime.Equal(l.ctime)
}

// readLinkOf reads the link name in n that a lookup found with attributes
// a, with the attributes of the link read, which the lookup then answers.
// It returns a zero Attr when a is no link, the node of name knows the
// target of the link a describes already, the namespace cannot tell, or
// the read failed: the name changed meanwhile, and Readlink reads it later.
func (n *node) readLinkOf(ctx context.Context, name string, a namespace.Attr) (string, namespace.Attr) {
	lr, ok := n.m.fsys.(namespace.LinkReader)
	if !ok || a.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return "", namespace.Attr{}
	}
	if ci := n.GetChild(name); ci != nil {
		if c, ok := ci.Operations().(*node); ok && c.knowsTarget(a) {
			return "", namespace.Attr{}
		}
	}
	target, la, err := lr.ReadlinkAttr(ctx, n.child(name))
	if err != nil {
		return "", namespace.Attr{}
	}
	return target, la
}

// knowTarget records the target of the link n, read with attributes a.
func (n *node) knowTarget(target string, a namespace.Attr) {
	if a.Ino != n.StableAttr().Ino {
		return
	}
	n.mu.Lock()
	n.link = &linkTarget{target: target, ino: a.Ino, ctime: a.Ctime}
	n.mu.Unlock()
}

// knowsTarget reports whether n knows the target of the link that a
// describes.
func (n *node) knowsTarget(a namespace.Attr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.link != nil && n.link.of(a)
}

// knownTarget returns the target of the link n if it is known.
func (n *node) knownTarget() (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.link == nil {
		return "", false
	}
	return n.link.target, true
}

// Readlink returns the target of a symbolic link: the one the node knows
// (see linkTarget), or else the one its path names, if that is still the
// link n. A path that names another file now gets ESTALE, which makes the
// kernel walk it again.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if target, ok := n.knownTarget(); ok {
		return []byte(target), 0
	}
	lr, ok := n.m.fsys.(namespace.LinkReader)
	if !ok {
		target, err := n.m.fsys.Readlink(n.ctx(ctx), n.path())
		if err != nil {
			return nil, errno(err)
		}
		return []byte(target), 0
	}
	target, a, err := lr.ReadlinkAttr(n.ctx(ctx), n.path())
	if e := errno(err); e == syscall.EINVAL || e == syscall.ENOENT || err == nil && a.Ino != 0 && a.Ino != n.StableAttr().Ino {
		return nil, syscall.ESTALE
	}
	if err != nil {
		return nil, errno(err)
	}
	n.knowTarget(target, a)
	return []byte(target), 0
}
