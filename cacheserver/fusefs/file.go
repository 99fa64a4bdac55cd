package fusefs

import (
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// handle is an open file. Its data calls run as the identity that opened
// it, whose open the namespace checked, whoever sends them later (the
// kernel's write-back of cached pages comes with no caller).
type handle struct {
	as    context.Context
	cred  ident.Cred
	flags uint32
	// passFd is a descriptor for FUSE passthrough, or -1.
	passFd int
}

var _ fs.FilePassthroughFder = (*handle)(nil)

// PassthroughFd returns the descriptor the kernel may read and write
// directly, if the Options.Passthrough hook gave one.
func (h *handle) PassthroughFd() (int, bool) { return h.passFd, h.passFd >= 0 }

// writable reports whether h was opened for writing.
func (h *handle) writable() bool { return h.flags&syscall.O_ACCMODE != syscall.O_RDONLY }

// newHandle makes a handle on n for the identity in ctx. The caller has
// counted the open already (see Open).
func (n *node) newHandle(ctx context.Context, flags uint32) (*handle, uint32) {
	cred, _ := ident.FromContext(ctx)
	h := &handle{as: ident.NewContext(context.Background(), cred), cred: cred, flags: flags, passFd: -1}
	if hook := n.m.opts.Passthrough; hook != nil {
		if fd, ok := hook(h.as, n.path(), flags); ok {
			h.passFd = fd
		}
	}
	return h, n.m.opts.openFlags(flags, h.passFd >= 0)
}

// openFlags returns the FUSE open flags for an open with flags. Without the
// client cache a write-only open bypasses the page cache (FOPEN_DIRECT_IO):
// a write-through write would copy the bytes into the page cache and then
// out to the mount, which nothing of that descriptor reads back, and the
// kernel sends the writes as they come either way. The kernel writes back
// dirty pages of the range, from shared mappings through other
// descriptors, before a direct write and drops cached pages of the range,
// so readers on the node see the new bytes. Handles that read keep the
// page cache: its read-ahead serves small sequential reads and mmap.
//
// Direct writes may run in parallel (FOPEN_PARALLEL_DIRECT_WRITES):
// otherwise the kernel holds the file's inode lock for the whole of each
// one, reply included, and processes writing their own parts of a shared
// file, as IOR without -F does, take turns with one request in flight.
// The kernel still serializes appends, writes past the end of the file
// and writes while the file is open in caching mode; the servers order
// overlapping writes as they order those of several nodes.
func (o Options) openFlags(flags uint32, passthrough bool) uint32 {
	var fuseFlags uint32
	if o.ClientCache {
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	switch {
	case passthrough:
		fuseFlags |= fuse.FOPEN_PASSTHROUGH
	case !o.ClientCache && flags&syscall.O_ACCMODE == syscall.O_WRONLY:
		fuseFlags |= fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES
	}
	return fuseFlags
}

// addOpen counts an open of n, unless n is a file unlinked while open whose
// last release came already: its hidden name is going, or gone, and it
// reports false. The kernel still opens such a file for a path walk that
// found it before the unlink or rename that hid it; on a local file system
// that open gets the unlinked file, here it must look the name up again.
func (n *node) addOpen(ctx context.Context) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hidden && n.opens == 0 {
		return false
	}
	n.opens++
	n.m.use(ctx, n.StableAttr().Ino)
	return true
}

// Releaser is implemented by a namespace.FS that keeps what it knows of a
// file while the mount has it open.
type Releaser interface {
	// Released says that the mount released its last open of path.
	Released(path string)
}

// dropOpen uncounts an open of n; the last one tells the namespace
// (Releaser), and removes the hidden name of a file that was unlinked
// while open.
func (n *node) dropOpen(ctx context.Context) syscall.Errno {
	if n.m.opts.ClientCache {
		// A walk may find the file without a lookup (see busyChild). The
		// kernel names no thread for a release.
		n.m.use(ctx, n.StableAttr().Ino)
	}
	n.mu.Lock()
	n.opens--
	released := n.opens == 0
	last := released && n.hidden
	as := n.unlinkAs
	n.mu.Unlock()
	if r, ok := n.m.fsys.(Releaser); ok && released {
		r.Released(n.path())
	}
	if !last {
		return 0
	}
	h := n.hiddenAt.Load()
	if h == nil {
		return 0
	}
	p := h.dir.child(h.name)
	if err := n.m.fsys.Unlink(as, p); err != nil {
		n.m.log.Warn("Removing the hidden name of an unlinked file failed", "path", p, "err", err)
		return errno(err)
	}
	n.hiddenAt.Store(nil)
	n.mu.Lock()
	n.hidden = false
	n.mu.Unlock()
	if h.dir.GetChild(h.name) == &n.Inode {
		h.dir.RmChild(h.name)
	}
	return 0
}

// Open opens the file n.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.ctx(ctx)
	// Counting the open first makes an unlink or a rename over the file
	// that races with the open hide it rather than remove it.
	if !n.addOpen(ctx) {
		return nil, 0, syscall.ESTALE
	}
	// An unlink or a rename that is removing the file and found it not
	// open goes first (see removing).
	n.m.removals.await(n.StableAttr().Ino)
	if flags&syscall.O_TRUNC != 0 {
		// The open changes the file (where the kernel does not cut it
		// with a setattr first).
		n.written()
	}
	a, err := n.m.fsys.Open(ctx, n.path(), int(flags))
	if e := errno(err); err == nil && a.Ino != 0 && a.Ino != n.StableAttr().Ino || e == syscall.ENOENT || e == syscall.ELOOP {
		// The name now stands for another file, or for none, or for a
		// symbolic link (which the kernel never opens, but follows):
		// ESTALE makes the kernel look the name up again and retry (an
		// open that may create the file then creates it).
		err = syscall.ESTALE
	}
	if err == nil && n.m.opts.ClientCache && a.IsRegular() && n.opensAnother(a) {
		// A file created under the inode number of one removed behind the
		// mount, or changed in place behind it: the kernel's inode of n,
		// its size and its pages are the old file's. Nodes made from now
		// on are new (see generations), and ESTALE makes the kernel look
		// the name up again into one.
		n.m.gens.renew(a.Ino)
		err = syscall.ESTALE
	}
	if err != nil {
		// The open's own error is what the caller must see.
		_ = n.dropOpen(ctx)
		return nil, 0, errno(err)
	}
	n.mode.Store(a.Mode)
	h, fuseFlags := n.newHandle(ctx, flags)
	return h, fuseFlags, 0
}

// Create creates and opens a regular file.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	req := ctx
	ctx = n.ctx(ctx)
	a, err := n.m.fsys.Create(n.m.withUmask(req, ctx), n.child(name), int(flags), mode)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	// go-fuse makes a new node of a created file whatever nodes it has of
	// the inode number, and the kernel a new inode.
	ci := n.newChild(ctx, a, out)
	c := ci.Operations().(*node)
	c.opensAnother(a)
	c.written()
	_ = c.addOpen(ctx) // a new node, never hidden
	h, fuseFlags := c.newHandle(ctx, flags)
	return ci, h, fuseFlags, 0
}

// FileReader is implemented by a namespace.FS that can leave the bytes of
// a read in a file, such as the slab file of a cache server on this
// machine. The mount then splices them to the kernel without copying them.
type FileReader interface {
	// ReadAtFile reads like ReadAt, except that it may return, instead of
	// filling p, where the bytes are.
	ReadAtFile(ctx context.Context, path string, p []byte, off int64) (int, *namespace.FileData, error)
}

// spliceMin is the smallest read whose bytes are spliced from a file.
// Splicing costs five system calls (header into a pipe, bytes into the
// pipe, pipe into the kernel, and emptying the pipe for its next use),
// copying through the buffer two (a read and the reply); for random 4 KiB
// reads the calls cost more than the copy saves.
const spliceMin = 32 << 10

// Read reads from an open file.
func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h := f.(*handle)
	var got int
	if fr, ok := n.m.fsys.(FileReader); ok && len(dest) >= spliceMin {
		var fd *namespace.FileData
		err := n.readAtPath(func(p string) (err error) {
			if fd != nil && fd.Release != nil {
				fd.Release()
			}
			got, fd, err = fr.ReadAtFile(h.as, p, dest, off)
			return err
		})
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, readErrno(err)
		}
		if fd != nil {
			return &fileResult{fd}, 0
		}
		return bufResult(dest[:got]), 0
	}
	err := n.readAtPath(func(p string) (err error) {
		got, err = n.m.fsys.ReadAt(h.as, p, dest, off)
		return err
	})
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, readErrno(err)
	}
	return bufResult(dest[:got]), 0
}

// readErrno converts the error of a read through an open file: ENOENT,
// which read(2) never gives, says that the file is gone (an open that
// raced with a rename or unlink that removed the file, which this mount
// did not have open yet), and gets EIO, as the file's other calls do.
func readErrno(err error) syscall.Errno {
	if e := errno(err); e != syscall.ENOENT {
		return e
	}
	return syscall.EIO
}

// bufResult is a read reply of bytes in memory. It goes to the kernel in
// one writev: go-fuse writes a ReadResultData into a pipe first, to try a
// splice it cannot do, and then empties the pipe again, which costs two
// system calls and a copy of the bytes.
func bufResult(b []byte) fuse.ReadResult { return fuse.ReadResultVector([][]byte{b}) }

// fileResult is a read reply whose bytes the server splices from a file
// into the kernel's pipe, releasing them once sent.
type fileResult struct{ *namespace.FileData }

// Seekable lets go-fuse splice the bytes.
func (r *fileResult) Seekable() (uintptr, int64, int) { return r.Fd, r.Off, r.Len }

// Size returns the length of the reply.
func (r *fileResult) Size() int { return r.Len }

// Bytes reads the bytes into buf, where splicing is not possible.
func (r *fileResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	n, err := syscall.Pread(int(r.Fd), buf[:min(len(buf), r.Len)], r.Off)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	return buf[:n], fuse.OK
}

// Done releases the bytes.
func (r *fileResult) Done() { r.Release() }

// Write writes to an open file.
func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h := f.(*handle)
	n.written()
	p, done := n.usePath()
	defer done()
	got, err := n.m.fsys.WriteAt(n.m.fromPageCache(ctx, h.as), p, data, off)
	if err != nil {
		return uint32(got), errno(err)
	}
	// A holder of CAP_FSETID keeps the bits (see ident.Cred.KilledByWrite):
	// its writes need no look at the file.
	if !h.cred.Capable(unix.CAP_FSETID) && n.mode.Load()&(unix.S_ISUID|unix.S_ISGID) != 0 {
		n.killPriv(h.as, h.cred, p)
	}
	return uint32(got), 0
}

// killPriv clears the setuid and setgid bits of p that a write by cred
// clears, where the namespace did not clear them itself.
func (n *node) killPriv(ctx context.Context, cred ident.Cred, p string) {
	a, err := n.m.fsys.GetAttr(ctx, p)
	if err != nil {
		return
	}
	n.mode.Store(a.Mode)
	kill := cred.KilledByWrite(a.Mode, a.GID)
	if kill == 0 {
		return
	}
	mode := a.Mode & 07777 &^ kill
	if a, err = n.m.fsys.SetAttr(ctx, p, namespace.SetAttr{Mode: &mode}); err == nil {
		n.mode.Store(a.Mode)
	}
}

// Fsync makes the file's data durable as the namespace defines it, and a
// directory's entries durable on the backing file system.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	as := n.ctx(ctx)
	if h, ok := f.(*handle); ok {
		as = h.as
	}
	p, done := n.usePath()
	defer done()
	isDir := n == n.m.root || n.mode.Load()&syscall.S_IFMT == syscall.S_IFDIR
	if ds, ok := n.m.fsys.(namespace.DirSyncer); ok && isDir {
		return errno(ds.SyncDir(as, p))
	}
	return errno(n.m.fsys.Fsync(as, p))
}

// Flusher is implemented by a namespace.FS that keeps something about a
// file on the client side until the file is closed, such as how far this
// client's writes extended it, or that makes written data durable at close.
// The mount calls Flush at every close(2), so that another mount that opens
// the file afterwards sees what was written (close-to-open consistency);
// an error it returns is close's.
type Flusher interface {
	Flush(ctx context.Context, path string) error
}

// Flush is called at every close. The kernel has sent cached pages before
// it; a namespace that is a Flusher publishes what it holds.
func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	fl, ok := n.m.fsys.(Flusher)
	if !ok {
		return 0
	}
	as := n.ctx(ctx)
	if h, ok := f.(*handle); ok {
		as = h.as
	}
	p, done := n.usePath()
	defer done()
	return errno(fl.Flush(as, p))
}

// Release closes a handle.
func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if h, ok := f.(*handle); ok && h.passFd >= 0 {
		unix.Close(h.passFd)
	}
	return n.dropOpen(ctx)
}
