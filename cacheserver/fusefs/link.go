package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// A symbolic link never changes its target, so the mount reads a link once:
// with its attributes, in one look at it (namespace.LinkReader), at the
// lookup that finds it. The kernel reads a link at every path walk through
// it, and the mount answers without a call. Reading the link by its path
// later instead would find whatever the path names by then: a rename that
// put a file there would answer EINVAL to a walk that found a link, another
// link its target in the place of the link found.
//
// The targets are kept by inode number, not in the nodes: a lookup that
// finds a number that go-fuse has a node of already answers that node, and
// the node the lookup made goes unused. A target serves while the
// attributes found of its number keep the change time and size of the link
// read: a new link under a reused number has a change time of its own (or,
// made within the same clock tick, another target length, mostly).

// linkTarget is the target of a link with the attributes it was read with.
type linkTarget struct {
	target string
	ctime  time.Time
}

// of reports whether a are attributes of the link l was read from, of the
// same inode number.
func (l *linkTarget) of(a namespace.Attr) bool {
	return a.Mode&syscall.S_IFMT == syscall.S_IFLNK && a.Ctime.Equal(l.ctime) && a.Size == int64(len(l.target))
}

// knowTarget records target, read from the link with attributes a.
func (s *Server) knowTarget(target string, a namespace.Attr) {
	s.links.Store(a.Ino, &linkTarget{target: target, ctime: a.Ctime})
}

// knowsTarget reports whether the mount knows the target of the link that
// a describes.
func (s *Server) knowsTarget(a namespace.Attr) bool {
	v, ok := s.links.Load(a.Ino)
	return ok && v.(*linkTarget).of(a)
}

// knownTarget returns the target of the link of inode number ino, if known.
func (s *Server) knownTarget(ino uint64) (string, bool) {
	v, ok := s.links.Load(ino)
	if !ok {
		return "", false
	}
	return v.(*linkTarget).target, true
}

// forgetTargetUnless forgets the target known of the inode number of a
// unless a describes the link it was read from: the number now stands for
// another file.
func (s *Server) forgetTargetUnless(a namespace.Attr) {
	if v, ok := s.links.Load(a.Ino); ok && !v.(*linkTarget).of(a) {
		s.links.CompareAndDelete(a.Ino, v)
	}
}

// readLinkOf reads the link name in n that a lookup found with attributes
// a, and returns the attributes of the link read, which the lookup then
// answers. It returns a zero Attr when a is no link, the mount knows the
// target of the link a describes already, the namespace cannot tell, or
// the read failed: the name changed meanwhile, and Readlink reads it later.
func (n *node) readLinkOf(ctx context.Context, name string, a namespace.Attr) namespace.Attr {
	lr, ok := n.m.fsys.(namespace.LinkReader)
	if !ok || a.Mode&syscall.S_IFMT != syscall.S_IFLNK || n.m.knowsTarget(a) {
		return namespace.Attr{}
	}
	target, la, err := lr.ReadlinkAttr(ctx, n.child(name))
	if err != nil || la.Ino == 0 {
		return namespace.Attr{}
	}
	n.m.knowTarget(target, la)
	return la
}

// Readlink returns the target of a symbolic link: the one the mount knows
// (see linkTarget), or else the one its path names, if that is still the
// link n. A path that names another file now gets ESTALE, which makes the
// kernel walk it again.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if target, ok := n.m.knownTarget(n.StableAttr().Ino); ok {
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
	if a.Ino != 0 {
		n.m.knowTarget(target, a)
	}
	return []byte(target), 0
}
