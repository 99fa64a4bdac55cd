package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
)

var (
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
)

// Getxattr reads an extended attribute, or its size when dest is empty.
// An attribute that the lookup the kernel made for this call found absent
// is answered so, without asking the servers again (see probe.go).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	ctx = n.ctx(ctx)
	if e := n.probedAbsent(ctx, attr); e != 0 {
		n.m.interest.note(attr, time.Now())
		return 0, e
	}
	got, err := n.m.fsys.Getxattr(ctx, n.path(), attr, dest)
	if err != nil {
		e := errno(err)
		if absentXattr(e) {
			n.m.interest.note(attr, time.Now())
		}
		return 0, e
	}
	return uint32(got), 0
}

// Setxattr sets an extended attribute.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	defer n.m.xattrsChanged()
	n.written()
	return errno(n.m.fsys.Setxattr(n.ctx(ctx), n.path(), attr, data, int(flags)))
}

// Listxattr lists the names of the extended attributes.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	got, err := n.m.fsys.Listxattr(n.ctx(ctx), n.path(), dest)
	if err != nil {
		return 0, errno(err)
	}
	return uint32(got), 0
}

// Removexattr removes an extended attribute.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	defer n.m.xattrsChanged()
	n.written()
	return errno(n.m.fsys.Removexattr(n.ctx(ctx), n.path(), attr))
}
