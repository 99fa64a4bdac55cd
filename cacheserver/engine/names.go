package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"sync"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/index"
)

// dirSyncs shares the fsyncs of backing directories among the files whose
// names one round of the syncer, or one Sync, makes durable (rule 8 of the
// package doc). Every file of a round was written before the round began,
// so one fsync of a directory during the round covers the names of all of
// them: a job's many small files in one directory cost it one fsync a
// round, not one each.
type dirSyncs struct {
	store backing.Store

	mu   sync.Mutex
	dirs map[string]*dirSync
}

// dirSync is the fsync of one directory, done once.
type dirSync struct {
	once sync.Once
	err  error
}

func newDirSyncs(store backing.Store) *dirSyncs {
	return &dirSyncs{store: store, dirs: map[string]*dirSync{}}
}

// syncName fsyncs the directories that hold the name of the backing file
// p, from p's own up to the backing root: which of them the cache created
// (a write-back that found the file missing makes the file and its
// parents; a mount's create and mkdir make them on the backing store at
// once) is not known after a restart, and an fsync of a directory whose
// entries are durable already costs a file system little.
func (d *dirSyncs) syncName(ctx context.Context, p string) error {
	return d.syncChain(ctx, path.Dir(p))
}

// syncChain fsyncs dir and the directories above it, up to the backing
// root.
func (d *dirSyncs) syncChain(ctx context.Context, dir string) error {
	for ; ; dir = path.Dir(dir) {
		if err := d.sync(ctx, dir); err != nil {
			return err
		}
		if dir == "." {
			return nil
		}
	}
}

// sync fsyncs dir, unless it was, or is being, fsynced already.
func (d *dirSyncs) sync(ctx context.Context, dir string) error {
	d.mu.Lock()
	s := d.dirs[dir]
	if s == nil {
		s = &dirSync{}
		d.dirs[dir] = s
	}
	d.mu.Unlock()
	s.once.Do(func() {
		// A directory removed since, or replaced by a file or by a
		// symbolic link that leads out of the backing directory, has no
		// entries left to make durable; its removal is in its parent's,
		// which is fsynced next. Failing instead would fail every flush
		// of the server for as long as the name is not a directory.
		if err := d.store.SyncDir(ctx, dir); err != nil && !dirGone(err) {
			s.err = fmt.Errorf("fsync directory %q: %w", dir, err)
		}
	})
	return s.err
}

// syncNameOf makes the name of f's backing file durable, the first time
// since the engine learned of f that its data was made durable (rule 8).
func (e *Engine) syncNameOf(ctx context.Context, f *file, dirs *dirSyncs) error {
	e.mu.Lock()
	named := f.named
	e.mu.Unlock()
	if named {
		return nil
	}
	// Durable step: the names of the file and the directories above it. A
	// crash before it leaves the extents dirty, to be written back again.
	if err := dirs.syncName(ctx, f.path); err != nil {
		return err
	}
	e.mu.Lock()
	f.named = true
	e.mu.Unlock()
	return nil
}

// syncPathName makes the name of the backing file p durable for Sync: a
// file the engine holds, and whose name it made durable before, needs
// nothing more.
func (e *Engine) syncPathName(ctx context.Context, p string) error {
	e.mu.Lock()
	f := e.files[p]
	e.mu.Unlock()
	dirs := newDirSyncs(e.backing)
	if f == nil {
		return dirs.syncName(ctx, p)
	}
	return e.syncNameOf(ctx, f, dirs)
}

// nameChange is a backing directory whose entries a call through the
// cache changed, and that no fsync made durable since.
type nameChange struct {
	cred *ident.Cred // the caller's, to fsync as
	seq  uint64      // the engine's count of changes at the last one here
}

// NamesChanged records that a call through the cache made or moved the
// names at paths on the backing store itself, not through write-back:
// a create, mkdir, mknod, symlink or link makes one, a rename moves one
// (pass both paths; a directory moves everything below it). Their
// directories, and those above up to the backing root, must be fsynced
// before the cache says that the name is on the backing store (rule 8 of
// the package doc), and nothing else would: a file may get no data, and
// a rename moves data whose name was made durable under the old path.
// With Durability Backing they are fsynced before NamesChanged returns,
// since a close or fsync of the file, which need not reach this engine,
// must find the name durable. Otherwise Flush or FlushPath fsyncs them,
// and so does a Sync with Durability Backing; one that failed is kept for
// the next.
func (e *Engine) NamesChanged(ctx context.Context, paths ...string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	return e.namesChanged(ctx, paths...)
}

func (e *Engine) namesChanged(ctx context.Context, paths ...string) error {
	mine := e.recordNames(ctx, paths)
	if e.cfg.Durability != Backing {
		return nil
	}
	// Only this call's: calls at once each fsyncing all of them would
	// fsync each directory once per call.
	return e.syncNames(mine, newDirSyncs(e.backing))
}

// NamesRemoved records that a call through the cache removed the names at
// paths from the backing store (an unlink, an rmdir): Flush, FlushPath,
// a Sync with Durability Backing and Close make the removals durable, as
// NamesChanged says, so that a crash of the backing store's node after a
// flush does not bring the names back. Unlike a change, a removal is not
// made durable before the call returns, whatever the durability: a name
// that comes back loses no data, and no call of a job but an fsync of the
// directory, which a mount passes to the backing store, promises it gone.
func (e *Engine) NamesRemoved(ctx context.Context, paths ...string) {
	if err := e.enter(); err != nil {
		return
	}
	defer e.leave()
	e.recordNames(ctx, paths)
}

// recordNames records the directories of paths in changedNames, as the
// identity of ctx, and returns what it recorded.
func (e *Engine) recordNames(ctx context.Context, paths []string) map[string]nameChange {
	dirs := make([]string, len(paths))
	for i, p := range paths {
		dirs[i] = path.Dir(p)
	}
	return e.recordChanges(ctx, index.NamesChanged, dirs)
}

// recordChanges records each of paths as a change of kind, as the
// identity of ctx, and returns what it recorded. The next commit of the
// index records them durably (see changedLocked).
func (e *Engine) recordChanges(ctx context.Context, kind index.ChangeKind, paths []string) map[string]nameChange {
	var cred *ident.Cred
	if c, ok := ident.FromContext(ctx); ok {
		cred = &c
	}
	mine := make(map[string]nameChange, len(paths))
	e.mu.Lock()
	defer e.mu.Unlock()
	changed := e.changedLocked(kind)
	for _, p := range paths {
		e.nameSeq++
		mine[p] = nameChange{cred: cred, seq: e.nameSeq}
		changed[p] = mine[p]
		e.idxChange[index.Change{Kind: kind, Path: p}] = struct{}{}
	}
	return mine
}

// changedLocked returns the changes of kind that no fsync made durable
// yet: changedNames or changedAttrs. Each is kept in the index too, so that
// an engine opened after a crash still makes them durable (rule 8 of the
// package doc).
func (e *Engine) changedLocked(kind index.ChangeKind) map[string]nameChange {
	if kind == index.AttrsChanged {
		return e.changedAttrs
	}
	return e.changedNames
}

// syncChanged fsyncs the backing files whose attributes calls through the
// cache changed (AttrsChanged), and the directories whose names they
// changed (NamesChanged) with those above them, each once, and forgets
// those that no change came to while they were fsynced.
func (e *Engine) syncChanged() error {
	e.mu.Lock()
	attrs, names := maps.Clone(e.changedAttrs), maps.Clone(e.changedNames)
	e.mu.Unlock()
	dirs := newDirSyncs(e.backing)
	return errors.Join(e.syncAttrs(attrs, dirs), e.syncNames(names, dirs))
}

// syncNames fsyncs the directories of todo, taken from changedNames, and
// those above them, each once in dirs, and forgets those that no change
// came to since.
func (e *Engine) syncNames(todo map[string]nameChange, dirs *dirSyncs) error {
	var errs []error
	for dir, c := range todo {
		// Durable step: the changed entries and the directories above
		// them. A crash before it may bring back the names as they were.
		if err := dirs.syncChain(credContext(c.cred), dir); err != nil {
			errs = append(errs, err)
			continue
		}
		e.forgetChange(index.NamesChanged, dir, c)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("making names durable: %w", err)
	}
	return nil
}

// forgetChange forgets the change of kind at p, which an fsync made
// durable as of c, unless a change came to it since, and has the next
// commit delete its record.
func (e *Engine) forgetChange(kind index.ChangeKind, p string, c nameChange) {
	e.mu.Lock()
	defer e.mu.Unlock()
	changed := e.changedLocked(kind)
	if changed[p].seq == c.seq {
		delete(changed, p)
		e.idxChange[index.Change{Kind: kind, Path: p}] = struct{}{}
	}
}

// dirGone reports whether err, of an fsync of a directory by its path,
// says that the path names no directory of the backing store any more.
func dirGone(err error) bool {
	return errorsIsNotExist(err) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EXDEV)
}
