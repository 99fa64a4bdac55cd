package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

var _ fs.NodeAllocater = (*node)(nil)

// Allocater is implemented by a namespace.FS that can run fallocate(2) on a
// file the caller opened for writing. Without it the mount still extends
// files (mode 0) and accepts FALLOC_FL_KEEP_SIZE, which only reserves
// space, and refuses the other modes with EOPNOTSUPP.
type Allocater interface {
	Allocate(ctx context.Context, path string, off, size int64, mode uint32) error
}

// Allocate serves fallocate(2).
func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	h, ok := f.(*handle)
	if !ok || !h.writable() {
		return syscall.EBADF
	}
	n.written()
	_, done := n.usePath()
	defer done()
	if a, ok := n.m.fsys.(Allocater); ok {
		return errno(a.Allocate(h.as, n.path(), int64(off), int64(size), mode))
	}
	switch mode {
	case 0:
		return n.extend(h.as, int64(off+size))
	case unix.FALLOC_FL_KEEP_SIZE:
		return 0
	}
	return syscall.EOPNOTSUPP
}

// extend makes the file at least end bytes long.
func (n *node) extend(ctx context.Context, end int64) syscall.Errno {
	p := n.path()
	a, err := n.m.fsys.GetAttr(ctx, p)
	if err != nil || a.Size >= end {
		return errno(err)
	}
	_, err = n.m.fsys.SetAttr(ctx, p, namespace.SetAttr{Size: &end})
	if ot, ok := n.m.fsys.(OpenTruncater); ok && err != nil {
		_, err = ot.TruncateOpen(ctx, p, end)
	}
	return errno(err)
}
