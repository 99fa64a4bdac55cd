package main

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// slowNode is a loopback node that sleeps before every operation, a stand-in
// for a parallel file system reached over a network. Files are opened with
// direct I/O, so the kernel page cache cannot hide the latency, as it would
// not for a remote file system whose data another node may change.
type slowNode struct {
	*fs.LoopbackNode
	delay time.Duration
}

var (
	_ fs.NodeLookuper    = (*slowNode)(nil)
	_ fs.NodeGetattrer   = (*slowNode)(nil)
	_ fs.NodeOpener      = (*slowNode)(nil)
	_ fs.NodeCreater     = (*slowNode)(nil)
	_ fs.NodeWrapChilder = (*slowNode)(nil)
)

func newSlowRoot(dir string, delay time.Duration) (fs.InodeEmbedder, error) {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return nil, err
	}
	return &slowNode{LoopbackNode: root.(*fs.LoopbackNode), delay: delay}, nil
}

// WrapChild makes every node below the root slow too.
func (n *slowNode) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &slowNode{LoopbackNode: ops.(*fs.LoopbackNode), delay: n.delay}
}

// mountSlow mounts dir at mnt with delay added to every operation.
func mountSlow(dir, mnt string, delay time.Duration) (*fuse.Server, error) {
	root, err := newSlowRoot(dir, delay)
	if err != nil {
		return nil, err
	}
	return fs.Mount(mnt, root, mountOptions("slow"))
}

func (n *slowNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	time.Sleep(n.delay)
	return n.LoopbackNode.Lookup(ctx, name, out)
}

func (n *slowNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	time.Sleep(n.delay)
	return n.LoopbackNode.Getattr(ctx, f, out)
}

func (n *slowNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	time.Sleep(n.delay)
	fh, _, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &slowFile{FileHandle: fh, delay: n.delay}, fuse.FOPEN_DIRECT_IO, 0
}

func (n *slowNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	time.Sleep(n.delay)
	inode, fh, _, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return inode, &slowFile{FileHandle: fh, delay: n.delay}, fuse.FOPEN_DIRECT_IO, 0
}

// slowFile delays reads and writes and passes every other file operation to
// the loopback file it wraps.
type slowFile struct {
	fs.FileHandle
	delay time.Duration
}

func (f *slowFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	time.Sleep(f.delay)
	return f.FileHandle.(fs.FileReader).Read(ctx, dest, off)
}

func (f *slowFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	time.Sleep(f.delay)
	return f.FileHandle.(fs.FileWriter).Write(ctx, data, off)
}

func (f *slowFile) Flush(ctx context.Context) syscall.Errno {
	return f.FileHandle.(fs.FileFlusher).Flush(ctx)
}

func (f *slowFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	time.Sleep(f.delay)
	return f.FileHandle.(fs.FileFsyncer).Fsync(ctx, flags)
}

func (f *slowFile) Release(ctx context.Context) syscall.Errno {
	return f.FileHandle.(fs.FileReleaser).Release(ctx)
}

func (f *slowFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.FileHandle.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *slowFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.FileHandle.(fs.FileSetattrer).Setattr(ctx, in, out)
}
