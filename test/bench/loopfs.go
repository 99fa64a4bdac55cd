package main

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// loopNode is a go-fuse loopback node whose files the kernel cannot pass
// through to the backing files: every read and write goes to the daemon, as
// in a FUSE file system that is not a mirror of one local directory. It can
// sleep before every operation, a stand-in for a parallel file system
// reached over a network, and open files with flags such as direct I/O.
type loopNode struct {
	*fs.LoopbackNode
	delay     time.Duration
	openFlags uint32
}

var (
	_ fs.NodeLookuper    = (*loopNode)(nil)
	_ fs.NodeGetattrer   = (*loopNode)(nil)
	_ fs.NodeOpener      = (*loopNode)(nil)
	_ fs.NodeCreater     = (*loopNode)(nil)
	_ fs.NodeWrapChilder = (*loopNode)(nil)
)

// WrapChild makes every node below the root one of the same kind.
func (n *loopNode) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &loopNode{LoopbackNode: ops.(*fs.LoopbackNode), delay: n.delay, openFlags: n.openFlags}
}

func mountLoop(dir, mnt, name string, delay time.Duration, openFlags uint32) (*fuse.Server, error) {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return nil, err
	}
	node := &loopNode{LoopbackNode: root.(*fs.LoopbackNode), delay: delay, openFlags: openFlags}
	return fs.Mount(mnt, node, mountOptions(name))
}

// mountSlow mounts dir at mnt with delay added to every operation. Files are
// opened with direct I/O, so the kernel page cache cannot hide the latency,
// as it would not for a remote file system whose data another node may
// change.
func mountSlow(dir, mnt string, delay time.Duration) (*fuse.Server, error) {
	return mountLoop(dir, mnt, "slow", delay, fuse.FOPEN_DIRECT_IO)
}

// mountFUSE mounts dir at mnt as a plain FUSE file system: the loopback
// without the kernel's passthrough, with the page cache.
func mountFUSE(dir, mnt string) (*fuse.Server, error) {
	return mountLoop(dir, mnt, "fuse", 0, 0)
}

func (n *loopNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	time.Sleep(n.delay)
	return n.LoopbackNode.Lookup(ctx, name, out)
}

func (n *loopNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	time.Sleep(n.delay)
	return n.LoopbackNode.Getattr(ctx, f, out)
}

func (n *loopNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	time.Sleep(n.delay)
	fh, _, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &loopFile{FileHandle: fh, delay: n.delay}, n.openFlags, 0
}

func (n *loopNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	time.Sleep(n.delay)
	inode, fh, _, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return inode, &loopFile{FileHandle: fh, delay: n.delay}, n.openFlags, 0
}

// loopFile delays reads and writes and passes every other file operation to
// the loopback file it wraps. It has no PassthroughFd, so the kernel sends
// every read and write to the daemon.
type loopFile struct {
	fs.FileHandle
	delay time.Duration
}

func (f *loopFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	time.Sleep(f.delay)
	return f.FileHandle.(fs.FileReader).Read(ctx, dest, off)
}

func (f *loopFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	time.Sleep(f.delay)
	return f.FileHandle.(fs.FileWriter).Write(ctx, data, off)
}

func (f *loopFile) Flush(ctx context.Context) syscall.Errno {
	return f.FileHandle.(fs.FileFlusher).Flush(ctx)
}

func (f *loopFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	time.Sleep(f.delay)
	return f.FileHandle.(fs.FileFsyncer).Fsync(ctx, flags)
}

func (f *loopFile) Release(ctx context.Context) syscall.Errno {
	return f.FileHandle.(fs.FileReleaser).Release(ctx)
}

func (f *loopFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.FileHandle.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *loopFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.FileHandle.(fs.FileSetattrer).Setattr(ctx, in, out)
}
