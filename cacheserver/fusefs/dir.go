package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Opendir checks that the caller may read the directory, as opendir(3)
// does, before the first readdir.
func (n *node) Opendir(ctx context.Context) syscall.Errno {
	return errno(n.m.fsys.Access(n.ctx(ctx), n.path(), 4))
}

// Readdir lists the directory, leaving out the hidden names of files that
// were unlinked while open.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	entries, err := n.m.fsys.ReadDir(n.ctx(ctx), n.path())
	if err != nil {
		return nil, errno(err)
	}
	list := make([]fuse.DirEntry, 0, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name, hiddenPrefix) {
			continue
		}
		list = append(list, fuse.DirEntry{Name: e.Name, Mode: e.Mode, Ino: e.Ino})
	}
	return fs.NewListDirStream(list), 0
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
	return n.newChild(ctx, a, out), 0
}

// Readlink returns the target of a symbolic link.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	target, err := n.m.fsys.Readlink(n.ctx(ctx), n.path())
	if err != nil {
		return nil, errno(err)
	}
	return []byte(target), 0
}

// Link creates a hard link to target.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	a, err := n.m.fsys.Link(n.ctx(ctx), t.path(), n.child(name))
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, a, out), 0
}

// Rmdir removes an empty directory.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return errno(n.m.fsys.Rmdir(n.ctx(ctx), n.child(name)))
}

// Unlink removes a name. A file that this mount has open is moved to a
// hidden name instead, so that its descriptors keep working, unless it has
// other names that keep it: a hidden name would count as a link, and the
// file would show one link too many until it is closed.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = n.ctx(ctx)
	if c := n.openChild(name); c != nil {
		// hide moves the child in go-fuse's tree itself.
		release := n.m.holdNames()
		defer release(false, nil, nil, "")
		// A failed removal of the hidden name is logged; the unlink did
		// what it was asked.
		defer func() { _ = c.dropOpen() }()
		if a, err := n.m.fsys.GetAttr(ctx, n.child(name)); err != nil || a.Nlink < 2 {
			return c.hide(ctx, n, name)
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
	e := n.rename(ctx, name, np, newName, flags)
	release(e == 0, moved, np.EmbeddedInode(), newName)
	return e
}

// rename is Rename, with names held.
func (n *node) rename(ctx context.Context, name string, np *node, newName string, flags uint32) syscall.Errno {
	oldPath, newPath := n.child(name), np.child(newName)
	victim := np.openChild(newName)
	if victim != nil {
		defer func() { _ = victim.dropOpen() }()
	}
	if victim == nil || flags&(fs.RENAME_EXCHANGE|renameNoReplace) != 0 || victim.EmbeddedInode() == n.GetChild(name) {
		return errno(n.m.fsys.Rename(ctx, oldPath, newPath, flags))
	}
	if e := victim.hide(ctx, np, newName); e != 0 {
		return e
	}
	if err := n.m.fsys.Rename(ctx, oldPath, newPath, flags); err != nil {
		victim.unhide(ctx, np, newName)
		return errno(err)
	}
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
	ci := n.GetChild(name)
	if ci == nil || ci.IsDir() {
		return nil
	}
	c, ok := ci.Operations().(*node)
	if !ok {
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
