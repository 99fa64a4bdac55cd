package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/index"
)

// AttrsChanged records that a call through the cache changed the inodes
// of the backing files at paths on the backing store itself, not through
// write-back: a truncate, chmod, chown, utimes or a change of extended
// attributes. Nothing else would fsync them: a file whose data is clean is
// not written back, and a truncate may leave none. Until they are fsynced,
// a crash of the backing store's node can bring back a truncated file's
// old size (and the bytes past the end the job set), or its old mode,
// owner or times (rule 8 of the package doc). With Durability Backing
// they are fsynced before AttrsChanged returns, as NamesChanged does with
// names; otherwise Flush, FlushPath, Close and a Sync with Durability
// Backing fsync them, and one that failed is kept for the next. Recording
// costs a call nothing more: a file changed many times before a flush is
// fsynced once.
func (e *Engine) AttrsChanged(ctx context.Context, paths ...string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.attrsChanged(ctx, paths...)
}

func (e *Engine) attrsChanged(ctx context.Context, paths ...string) error {
	mine := e.recordChanges(ctx, index.AttrsChanged, paths)
	if e.cfg.Durability != Backing {
		return nil
	}
	return e.syncAttrs(mine, newDirSyncs(e.backing))
}

// syncAttrs fsyncs the files of todo, taken from changedAttrs, and forgets
// those that no change came to since. Directories are fsynced once in
// dirs, which the names of the same round share.
func (e *Engine) syncAttrs(todo map[string]nameChange, dirs *dirSyncs) error {
	var errs []error
	for p, c := range todo {
		// Durable step: the file's inode (size, mode, owner, times). A
		// crash before it may bring back the attributes it had.
		if err := e.syncAttr(credContext(c.cred), p, dirs); err != nil {
			errs = append(errs, err)
			continue
		}
		e.forgetChange(index.AttrsChanged, p, c)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("making attributes durable: %w", err)
	}
	return nil
}

// errNoOpen says that a backing file cannot be opened to fsync without
// harm: open(2) follows a symbolic link, blocks on a FIFO until a reader
// comes, and may act on a device.
var errNoOpen = errors.New("file not to be opened")

// syncAttr fsyncs the inode of the backing file p. What cannot be opened
// to fsync it (errNoOpen, a symbolic link, or a file the identity may not
// open) gets its directory fsynced instead, which on journalling file
// systems commits the change to its inode with the directory's. A file
// removed since counts as done, as for names (dirGone): its removal is its
// directory's, which NamesRemoved records.
func (e *Engine) syncAttr(ctx context.Context, p string, dirs *dirSyncs) error {
	err := e.syncInode(ctx, p, dirs)
	switch {
	case err == nil, errorsIsNotExist(err), errors.Is(err, syscall.ENOTDIR):
		return nil
	case errors.Is(err, errNoOpen), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EXDEV), errors.Is(err, fs.ErrPermission):
		return dirs.sync(ctx, path.Dir(p))
	}
	return fmt.Errorf("fsync %q: %w", p, err)
}

// syncInode fsyncs the backing file p: a regular file with Store.Sync, a
// directory with SyncDir, once in dirs.
func (e *Engine) syncInode(ctx context.Context, p string, dirs *dirSyncs) error {
	fi, err := e.backing.Stat(ctx, p)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return dirs.sync(ctx, p)
	case fi.Mode().IsRegular():
		return e.backing.Sync(ctx, p)
	}
	return errNoOpen
}

// NamesMoved records a rename of from to to that a call through the cache
// made on the backing store itself, as NamesChanged of both paths does,
// and moves the attribute changes recorded at or under from along with
// their files: an fsync by the old path would find nothing there and
// count them as done.
func (e *Engine) NamesMoved(ctx context.Context, from, to string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	e.attrsMoved(from, to)
	return e.namesChanged(ctx, from, to)
}

// attrsMoved moves the attribute changes recorded at or under from to the
// same places under to, and queues their records.
func (e *Engine) attrsMoved(from, to string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, c := range e.changedAttrs {
		if p != from && !strings.HasPrefix(p, from+"/") {
			continue
		}
		moved := to + strings.TrimPrefix(p, from)
		delete(e.changedAttrs, p)
		e.nameSeq++
		e.changedAttrs[moved] = nameChange{cred: c.cred, seq: e.nameSeq}
		e.idxChange[index.Change{Kind: index.AttrsChanged, Path: p}] = struct{}{}
		e.idxChange[index.Change{Kind: index.AttrsChanged, Path: moved}] = struct{}{}
	}
}
