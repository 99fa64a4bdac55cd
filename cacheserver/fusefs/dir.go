package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// OpendirHandle checks that the caller may read the directory, as
// opendir(3) does, and opens a listing of it.
func (n *node) OpendirHandle(ctx context.Context, _ uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := errno(n.m.fsys.Access(n.ctx(ctx), n.path(), 4)); e != 0 {
		return nil, 0, e
	}
	return &listing{n: n}, 0, 0
}

// listing is an open directory, read a page at a time when the namespace
// lists in pages (namespace.DirPager), so that the mount holds one page of
// each open directory rather than all its entries: 32 processes that each
// began to list a directory of 70,000 long names made the mount hold 1 GB.
// The offset of an entry is its position in the listing, "." and ".."
// first; the hidden names of files that were unlinked while open are left
// out. go-fuse serialises the calls on a handle.
type listing struct {
	n      *node
	dotted bool // "." and ".." were queued
	page   []fuse.DirEntry
	cookie uint64 // of the next page
	done   bool   // no page after this one
	off    uint64 // of the next entry
}

var (
	_ fs.FileReaddirenter = (*listing)(nil)
	_ fs.FileSeekdirer    = (*listing)(nil)
)

// listingPage is the size of the pages a listing asks for.
const listingPage = 128 << 10

// Readdirent returns the next entry, or nil at the end.
func (l *listing) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if !l.dotted {
		l.dotted = true
		l.page = l.dots()
	}
	for len(l.page) == 0 {
		if l.done {
			return nil, 0
		}
		if e := l.fetch(ctx); e != 0 {
			return nil, e
		}
	}
	de := l.page[0]
	l.page = l.page[1:]
	l.off++
	de.Off = l.off
	return &de, 0
}

// dots are the entries "." and "..", which a directory lists first, as on
// the backing file system: programs that read a directory with
// getdents(2) count on them, to tell an empty directory by its two
// entries, say.
func (l *listing) dots() []fuse.DirEntry {
	ino := l.n.StableAttr().Ino
	parent := ino
	if _, p := l.n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	return []fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR, Ino: ino}, {Name: "..", Mode: syscall.S_IFDIR, Ino: parent}}
}

// fetch reads the next page.
func (l *listing) fetch(ctx context.Context) syscall.Errno {
	var es []namespace.DirEntry
	var err error
	if pager, ok := l.n.m.fsys.(namespace.DirPager); ok {
		es, l.cookie, l.done, err = pager.ReadDirPage(l.n.ctx(ctx), l.n.path(), l.cookie, listingPage)
	} else {
		es, err = l.n.m.fsys.ReadDir(l.n.ctx(ctx), l.n.path())
		l.done = true
	}
	if err != nil {
		return errno(err)
	}
	l.page = make([]fuse.DirEntry, 0, len(es))
	for _, e := range es {
		if !strings.HasPrefix(e.Name, hiddenPrefix) {
			l.page = append(l.page, fuse.DirEntry{Name: e.Name, Mode: e.Mode, Ino: e.Ino})
		}
	}
	return 0
}

// Seekdir moves the listing to entry off: back to the start for
// rewinddir(3), or, for a seekdir(3) elsewhere, as many entries past it.
func (l *listing) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	l.dotted, l.page, l.cookie, l.done, l.off = false, nil, 0, false, 0
	for l.off < off {
		de, e := l.Readdirent(ctx)
		if e != 0 {
			return e
		}
		if de == nil {
			return 0
		}
	}
	return 0
}

// Mkdir creates a directory.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, err := n.m.fsys.Mkdir(n.m.withUmask(ctx, n.ctx(ctx)), n.child(name), mode)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Mknod creates a FIFO, socket or device file.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, err := n.m.fsys.Mknod(n.m.withUmask(ctx, n.ctx(ctx)), n.child(name), mode, uint64(dev))
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Symlink creates a symbolic link.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, err := n.m.fsys.Symlink(n.ctx(ctx), target, n.child(name))
	if err != nil {
		return nil, errno(err)
	}
	n.m.knowTarget(target, a)
	return n.newChild(ctx, a, out), 0
}

// Link creates a hard link to target.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	t.written()
	a, err := n.m.fsys.Link(n.ctx(ctx), t.path(), n.child(name))
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Rmdir removes an empty directory. One that holds nothing but the hidden
// names of files this mount has open is empty to its callers, as it would
// be on a local file system, where rm -rf of a tree in which a process
// still has a file open succeeds: those files move up into n first (see
// clearHidden).
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = n.ctx(ctx)
	e := errno(n.m.fsys.Rmdir(ctx, n.child(name)))
	if e != syscall.ENOTEMPTY {
		return e
	}
	release := n.m.holdNames()
	defer release(false, nil, nil, "")
	if !n.clearHidden(ctx, name) {
		return e
	}
	return errno(n.m.fsys.Rmdir(ctx, n.child(name)))
}

// Unlink removes a name. A file that this mount has open is moved to a
// hidden name instead, so that its descriptors keep working, unless it has
// other names that keep it: a hidden name would count as a link, and the
// file would show one link too many until it is closed. An open that lands
// while the file goes waits for it (removing).
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = n.ctx(ctx)
	end := n.removing(name)
	defer end()
	if c := n.openChild(name); c != nil {
		// hide moves the child in go-fuse's tree itself.
		release := n.m.holdNames()
		defer release(false, nil, nil, "")
		// A failed removal of the hidden name is logged; the unlink did
		// what it was asked.
		defer func() { _ = c.dropOpen(ctx) }()
		if a, err := n.m.fsys.GetAttr(ctx, n.child(name)); err != nil || a.Nlink < 2 {
			return c.hide(ctx, n, name, namespace.Hiding{}, true)
		}
	}
	return errno(n.m.fsys.Unlink(ctx, n.child(name)))
}

// Rename renames name to newName in newParent. An open file that the rename
// would replace is moved to a hidden name first.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	ctx = n.ctx(ctx)
	release := n.m.holdNames()
	moved := n.GetChild(name)
	if moved != nil {
		// A rename moves the change time of the file, as writes do.
		if m, ok := moved.Operations().(*node); ok {
			m.written()
		}
	}
	e := n.rename(ctx, name, np, newName, flags)
	release(e == 0, moved, np.EmbeddedInode(), newName)
	return e
}

// rename is Rename, with names held.
func (n *node) rename(ctx context.Context, name string, np *node, newName string, flags uint32) syscall.Errno {
	oldPath, newPath := n.child(name), np.child(newName)
	end := np.removing(newName)
	defer end()
	victim := np.openChild(newName)
	busy := false
	if victim == nil && flags == 0 {
		victim = np.busyChild(ctx, newName)
		busy = victim != nil
	}
	if victim != nil {
		defer func() { _ = victim.dropOpen(ctx) }()
	}
	if victim == nil || flags&(fs.RENAME_EXCHANGE|renameNoReplace) != 0 || victim.EmbeddedInode() == n.GetChild(name) {
		e := errno(n.m.fsys.Rename(ctx, oldPath, newPath, flags))
		if flags == 0 && (e == syscall.ENOTEMPTY || e == syscall.EEXIST) && np.clearHidden(ctx, newName) {
			// A directory that holds only files unlinked while open is
			// empty to the caller, as for rmdir (rename(2) may answer
			// either errno for a directory that is not empty).
			e = errno(n.m.fsys.Rename(ctx, oldPath, newPath, flags))
		}
		return e
	}
	why := namespace.Hiding{Name: newPath, Source: oldPath}
	if moved := n.GetChild(name); moved != nil {
		why.SourceIno = moved.StableAttr().Ino
	}
	if e := victim.hide(ctx, np, newName, why, !busy); e != 0 {
		if !busy {
			return e
		}
		// Hiding is a precaution for a file not open: the rename goes on
		// without it.
		return errno(n.m.fsys.Rename(ctx, oldPath, newPath, flags))
	}
	// Opens landing from now on open the file under its hidden name.
	end()
	if err := n.m.fsys.Rename(ctx, oldPath, newPath, flags); err != nil && !victim.unhide(ctx, np, newName, oldPath) {
		return errno(err)
	}
	victim.replaced(ctx)
	return 0
}

// renameNoReplace is RENAME_NOREPLACE of renameat2(2).
const renameNoReplace = 1

// openChild returns the child name of n if this mount has it open and it is
// not a directory, counted as open once more until the caller, done hiding
// it or not, drops that count (dropOpen). A last release that lands while
// the file is being hidden then leaves the removal of the hidden name to
// that drop, rather than finding the file not hidden yet and leaving the
// name behind for good.
func (n *node) openChild(name string) *node {
	c := n.fileChild(name)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opens == 0 {
		return nil
	}
	c.opens++
	return c
}

// fileChild returns the node of child name of n unless it is none or a
// directory.
func (n *node) fileChild(name string) *node {
	ci := n.GetChild(name)
	if ci == nil || ci.IsDir() {
		return nil
	}
	c, _ := ci.Operations().(*node)
	return c
}
