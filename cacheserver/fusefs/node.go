package fusefs

import (
	"context"
	"errors"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// node is one file or directory of the mount. Its path is its place in
// go-fuse's tree of inodes, which go-fuse keeps up to date on rename.
type node struct {
	fs.Inode
	m *Server

	// mode is the last mode seen, for the setuid clearing on write.
	mode atomic.Uint32

	// walled says that some directory above n does not let everyone
	// search it (see Options.PerCaller).
	walled bool

	mu sync.Mutex
	// opens counts the open handles of this node.
	opens int
	// hidden is set once the node has been renamed to a hidden name because
	// it was unlinked while open; unlinkAs is who unlinked it.
	hidden   bool
	unlinkAs context.Context
	// hiddenAt is where n is hidden while it is (nil otherwise), which
	// path answers: go-fuse's tree may also have n under the name it was
	// hidden from, for a lookup that found the file there before the
	// rename and came back after, and that name now stands for another
	// file.
	hiddenAt atomic.Pointer[hiddenName]
	// opened is the backing file that the last open or create of n found,
	// or before any, with the client cache, the lookup that made n.
	opened backing.FileID
	// wrote says that n was written or changed through the mount. Every
	// write sets it, in parallel for a shared file: not under mu.
	wrote atomic.Bool
}

// OnForget notes that the kernel forgot n.
func (n *node) OnForget() {
	st := n.StableAttr()
	n.m.gens.forgot(st.Ino, st.Gen)
	n.m.latest.CompareAndDelete(st.Ino, n)
	if st.Mode == syscall.S_IFLNK {
		n.m.links.Delete(st.Ino)
	}
}

// opensAnother reports whether an open of n that found a is of another
// file than the last open or create of n found under the same inode
// number, or of a version of it changed in place since, and records a,
// and n as the node that last opened the number, otherwise. A file written
// or changed through the mount is taken for the same version: the
// servers' write-back of it moves its change time.
func (n *node) opensAnother(a namespace.Attr) bool {
	id := backing.FileID{Ino: a.Ino, Birth: a.Birth, Gen: a.Gen}.ChangedAt(a.Ctime)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opened.Ino == a.Ino && (n.opened.Other(id) || !n.wrote.Load() && id.ChangedSince(n.opened)) {
		return true
	}
	if id.Birth != 0 || id.Gen != 0 || id.Change != 0 {
		// An answer that tells none keeps what an earlier one told.
		n.opened = id
	}
	if n.m.opts.ClientCache {
		// Not at the lookup that makes a node: go-fuse answers a lookup
		// with the node it has of the number, if any, and drops the new
		// one; the kernel opens the node it holds.
		n.m.latest.Store(a.Ino, n)
	}
	return false
}

// renewIfChanged gives the inode number of a, the attributes that a lookup
// found, a new generation when the node last opened of that number stands
// for an earlier version of the file, changed or replaced behind the mount
// since the node opened it: the lookup then makes a new node, as an open
// of the old one would after answering ESTALE (see generations). An open
// of another node that answered ESTALE, because the name now stands for
// this file, is retried by the kernel after such a lookup, and would
// otherwise find the old node, answer ESTALE again, and fail.
func (s *Server) renewIfChanged(a namespace.Attr) {
	v, ok := s.latest.Load(a.Ino)
	if !ok {
		return
	}
	old := v.(*node)
	if old.StableAttr().Gen == s.gens.current(a.Ino) && old.changedBehind(a) {
		s.gens.renew(a.Ino)
	}
}

// changedBehind reports whether a lookup that found a shows a later
// version of the file that n last opened, changed behind the mount (the
// change time moved, and not by the mount's own writes).
func (n *node) changedBehind(a namespace.Attr) bool {
	id := backing.FileID{Ino: a.Ino}.ChangedAt(a.Ctime)
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.opened.Ino == a.Ino && !n.wrote.Load() && id.ChangedSince(n.opened)
}

// written notes that n was written or changed through the mount.
func (n *node) written() {
	if !n.wrote.Load() {
		n.wrote.Store(true)
	}
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeOnForgetter    = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeAccesser       = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeReader         = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeFlusher        = (*node)(nil)
	_ fs.NodeReleaser       = (*node)(nil)
)

// path returns the namespace path of n ("" for the root): its hidden name
// if it has one.
func (n *node) path() string {
	if h := n.hiddenAt.Load(); h != nil {
		return h.dir.child(h.name)
	}
	return n.Path(n.Root())
}

// child returns the namespace path of name in directory n.
func (n *node) child(name string) string {
	return path.Join(n.path(), name)
}

// ctx returns ctx with the caller's identity.
func (n *node) ctx(ctx context.Context) context.Context {
	return n.m.callers.context(ctx)
}

// errno converts an error of the namespace for the kernel.
func errno(err error) syscall.Errno {
	return namespace.Errno(err)
}

// fill converts a namespace.Attr for the kernel and remembers the mode.
func (n *node) fill(a namespace.Attr, out *fuse.Attr) {
	n.mode.Store(a.Mode)
	out.Ino = a.Ino
	out.Mode = a.Mode
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.UID, a.GID
	out.Size = uint64(a.Size)
	out.Blocks = uint64(a.Blocks)
	out.Rdev = uint32(a.Rdev)
	out.Blksize = 4096
	out.Atime, out.Atimensec = split(a.Atime)
	out.Mtime, out.Mtimensec = split(a.Mtime)
	out.Ctime, out.Ctimensec = split(a.Ctime)
	n.mu.Lock()
	if n.hidden && out.Nlink > 0 {
		// The hidden name does not count: the file was unlinked.
		out.Nlink--
	}
	n.mu.Unlock()
	n.m.forgetTargetUnless(a)
}

func split(t time.Time) (uint64, uint32) {
	return uint64(t.Unix()), uint32(t.Nanosecond())
}

// newChild makes the inode for a file of directory n with attributes a.
func (n *node) newChild(ctx context.Context, a namespace.Attr, out *fuse.EntryOut) *fs.Inode {
	c := &node{m: n.m, walled: n.walled || n.mode.Load()&syscall.S_IXOTH == 0}
	c.fill(a, &out.Attr)
	if n.m.opts.ClientCache && a.IsRegular() {
		// The kernel's inode of c keeps the size that a describes, and
		// takes no other from the mount: a change of the file behind the
		// mount before its first open must renew it all the same.
		c.opened = backing.FileID{Ino: a.Ino}.ChangedAt(a.Ctime)
	}
	switch {
	case n.m.opts.PerCaller && c.walled:
		// Zero, which go-fuse keeps when the mount has no entry timeout
		// of its own (see fsOptions).
	case n.m.opts.ClientCache:
		out.SetEntryTimeout(n.m.opts.EntryTimeout)
	case a.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		out.SetEntryTimeout(dirEntryTimeout)
	}
	return n.NewInode(ctx, c, fs.StableAttr{Mode: a.Mode & syscall.S_IFMT, Ino: a.Ino, Gen: n.m.gens.current(a.Ino)})
}

// Lookup finds name in directory n. What it learnt of extended attributes
// replaces what the calling thread's last lookup learnt (see probe.go); a
// failed lookup drops that, so a file the thread makes next, maybe with
// the inode number of the file that lookup found and other attributes
// (a default ACL's), is never answered for by it. The kernel looks a
// name up before it makes a file of it, since it trusts no absence
// (NegativeTimeout is zero).
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, probe, err := n.lookupAttr(n.ctx(ctx), n.child(name))
	if err != nil {
		n.m.probes.keep(ctx, nil)
		return nil, errno(err)
	}
	if n.m.opts.ClientCache && a.IsRegular() {
		n.m.renewIfChanged(a)
	}
	if a.IsRegular() {
		n.m.use(ctx, a.Ino)
	}
	if a.IsDir() && n.within(a.Ino) {
		n.m.probes.keep(ctx, nil)
		n.m.log.Warn("A directory has the inode number of a directory above it: not served", "path", n.child(name), "ino", a.Ino)
		return nil, syscall.EXDEV
	}
	if la := n.readLinkOf(n.ctx(ctx), name, a); la.Ino != 0 {
		a = la
	}
	ch := n.newChild(ctx, a, out)
	n.m.probes.keep(ctx, probe)
	return ch, 0
}

// within reports whether n or a directory above it has inode number ino.
// go-fuse knows a directory by its number: a directory found under one of
// that number would be taken for it, its tree would hold a loop, and the
// path of every node below would grow without end, as would the mount's
// memory. The servers answer EXDEV for the mount points below the
// backing root, where such numbers come from, but a server of an earlier
// release passed them, and a file system may number its directories as
// it likes.
func (n *node) within(ino uint64) bool {
	for p := &n.Inode; p != nil; {
		if p.StableAttr().Ino == ino {
			return true
		}
		_, p = p.Parent()
	}
	return false
}

// Getattr reports the attributes of n.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	a, err := n.m.fsys.GetAttr(n.ctx(ctx), n.path())
	if errors.Is(err, syscall.ENOENT) && f != nil {
		// The open file lost its name to a race (see stale).
		return syscall.EIO
	}
	if err != nil {
		return errno(err)
	}
	if e := n.stale(a, f); e != 0 {
		return e
	}
	n.fill(a, &out.Attr)
	return 0
}

// stale reports whether the path of n now names another file than n, which
// happens when a rename or unlink races with a lookup. A path-based call
// gets ESTALE, which makes the kernel look the name up again; a call on an
// open file whose file is gone gets EIO, as on a loopback file system whose
// inode was reused.
func (n *node) stale(a namespace.Attr, f fs.FileHandle) syscall.Errno {
	st := n.StableAttr()
	if n.IsRoot() || a.Ino == 0 || (a.Ino == st.Ino && a.Mode&syscall.S_IFMT == st.Mode&syscall.S_IFMT) {
		return 0
	}
	if f != nil {
		return syscall.EIO
	}
	return syscall.ESTALE
}

// Setattr changes attributes: chmod, chown, truncate and utimens.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = n.ctx(ctx)
	n.written()
	sa := setAttr(in)
	if n.m.opts.ClientCache && sa.Size != nil {
		// The kernel's write-back cache sends its own times with every
		// truncation; explicit times would need ownership, and the
		// truncation sets them on the backing file system anyway.
		sa.Atime, sa.Mtime = nil, nil
	}
	if wb, ok := n.m.fsys.(WriteBacker); ok && sa.Mtime != nil && sa.Size == nil && !n.kernelTimes(f, in) {
		// Not under usePath: the write-back may take long, and a rename
		// that waited for it would hold up every data call of the mount.
		// A rename meanwhile writes the file back itself.
		if err := wb.WriteBack(ctx, n.path()); err != nil {
			return errno(err)
		}
	}
	p, done := n.usePath()
	defer done()
	a, err := n.m.fsys.SetAttr(ctx, p, sa)
	if refused(err) {
		a, err = n.setAttrRefused(ctx, f, in, sa, err)
	}
	if err != nil {
		return errno(err)
	}
	n.fill(a, &out.Attr)
	return 0
}

func refused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)
}

// setAttrRefused retries a change that the namespace refused, where POSIX or
// the kernel's write-back cache allow it: a truncation through a writable
// handle, and the times that the write-back cache sends on its own; and it
// answers the change of nothing that comes before a write.
func (n *node) setAttrRefused(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, sa namespace.SetAttr, err error) (namespace.Attr, error) {
	if sa.KillSetid {
		// The kernel sends the same change of nothing before a write that
		// clears the bits (file_remove_privs), which a writer who does not
		// own the file may make: the write clears them itself. A chown to
		// no owner by such a caller, which the kernel would refuse, thus
		// succeeds, changing nothing.
		return n.m.fsys.GetAttr(ctx, n.path())
	}
	if h, ok := f.(*handle); ok && h.writable() && sa.Size != nil && errors.Is(err, syscall.EACCES) {
		return n.truncateOpen(ctx, sa)
	}
	var a namespace.Attr
	if n.m.opts.ClientCache && nowish(sa) {
		if a, err = n.m.fsys.SetAttr(ctx, n.path(), asNow(sa)); !refused(err) {
			return a, err
		}
	}
	if n.kernelTimes(f, in) {
		// The backing file system set its own times when the data landed.
		return n.m.fsys.GetAttr(ctx, n.path())
	}
	return a, err
}

// nowish reports whether sa sets explicit times within a few seconds of
// now. With the write-back cache the kernel keeps times itself and turns
// utimensat(UTIME_NOW), which needs only write permission, into explicit
// times, which need ownership.
func nowish(sa namespace.SetAttr) bool {
	near := func(t *time.Time) bool { return t == nil || time.Since(*t).Abs() < 3*time.Second }
	return (sa.Atime != nil || sa.Mtime != nil) && near(sa.Atime) && near(sa.Mtime)
}

// asNow turns the explicit times of sa into "now".
func asNow(sa namespace.SetAttr) namespace.SetAttr {
	sa.AtimeNow = sa.AtimeNow || sa.Atime != nil
	sa.MtimeNow = sa.MtimeNow || sa.Mtime != nil
	sa.Atime, sa.Mtime = nil, nil
	return sa
}

// kernelTimes reports whether in looks like the kernel's write-back cache
// passing on the times it keeps for a file open for writing: explicit
// times, nothing else, through a writable handle. Setting explicit times
// needs ownership, so for a writer who does not own the file the namespace
// refuses them; the write itself already updated the times on the backing
// file system. A futimens(2) with explicit times by a writer who is not the
// owner is then ignored instead of refused, with the client cache only.
func (n *node) kernelTimes(f fs.FileHandle, in *fuse.SetAttrIn) bool {
	h, ok := f.(*handle)
	const times = fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_CTIME
	return ok && n.m.opts.ClientCache && h.writable() && in.Valid&^(times|fuse.FATTR_FH|fuse.FATTR_LOCKOWNER) == 0 && in.Valid&times != 0
}

// WriteBacker is implemented by a namespace.FS that holds written data for
// a while before it reaches the backing file system, whose write then sets
// the file's modification time to its own. The mount has it write path
// back before it sets an explicit modification time (utimensat(2), as
// cp -p and tar do after writing), so that the time the job gave the file
// is the one it keeps. The times the kernel's write-back cache sends for
// its own writes are the exception (kernelTimes): writing back at every
// close would undo that cache. Implementations must return once the data
// is in the backing file; they need not wait for it to be made durable
// there, since an fsync does not move the modification time.
type WriteBacker interface {
	WriteBack(ctx context.Context, path string) error
}

// OpenTruncater is implemented by a namespace.FS that can truncate a file
// through a descriptor the caller opened for writing (ftruncate(2)), which
// POSIX allows even after the caller lost write permission to the file, as
// for a file created with mode 0444. The mount uses it when SetAttr refuses
// such a truncation.
type OpenTruncater interface {
	TruncateOpen(ctx context.Context, path string, size int64) (namespace.Attr, error)
}

// truncateOpen truncates through OpenTruncater, then applies the other
// changes of sa.
func (n *node) truncateOpen(ctx context.Context, sa namespace.SetAttr) (namespace.Attr, error) {
	ot, ok := n.m.fsys.(OpenTruncater)
	if !ok {
		return namespace.Attr{}, syscall.EACCES
	}
	p := n.path()
	a, err := ot.TruncateOpen(ctx, p, *sa.Size)
	if err != nil || sa == (namespace.SetAttr{Size: sa.Size}) {
		return a, err
	}
	sa.Size = nil
	return n.m.fsys.SetAttr(ctx, p, sa)
}

// setAttr converts a FUSE SETATTR request. Times to be set to "now" stay
// UTIME_NOW, which needs only write access where an explicit time needs
// ownership.
func setAttr(in *fuse.SetAttrIn) namespace.SetAttr {
	var s namespace.SetAttr
	if m, ok := in.GetMode(); ok {
		s.Mode = &m
	}
	if u, ok := in.GetUID(); ok {
		s.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		s.GID = &g
	}
	if sz, ok := in.GetSize(); ok {
		size := int64(sz)
		s.Size = &size
	}
	// A chown that changes neither the owner nor the group reaches the
	// mount as a change of nothing but the change time, which the kernel
	// sends only under the write-back cache: with CAP_HANDLE_KILLPRIV_V2
	// the client's kernel leaves clearing setuid and setgid to the daemon.
	const chownNone = fuse.FATTR_CTIME | fuse.FATTR_FH | fuse.FATTR_LOCKOWNER | fuse.FATTR_KILL_SUIDGID
	s.KillSetid = in.Valid&^chownNone == 0
	s.AtimeNow = in.Valid&fuse.FATTR_ATIME_NOW != 0
	s.MtimeNow = in.Valid&fuse.FATTR_MTIME_NOW != 0
	if t, ok := in.GetATime(); ok && !s.AtimeNow {
		s.Atime = &t
	}
	if t, ok := in.GetMTime(); ok && !s.MtimeNow {
		s.Mtime = &t
	}
	return s
}

// Access checks access(2) permission for the caller.
func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	return errno(n.m.fsys.Access(n.ctx(ctx), n.path(), mask))
}

// Statfs reports the capacity and use of the namespace.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st, err := n.m.fsys.StatFS(n.ctx(ctx))
	if err != nil {
		return errno(err)
	}
	*out = fuse.StatfsOut{
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Files: st.Files, Ffree: st.Ffree,
		Bsize: st.Bsize, NameLen: st.NameLen, Frsize: st.Bsize,
	}
	return 0
}
