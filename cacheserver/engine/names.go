package engine

import (
	"context"
	"fmt"
	"path"
	"sync"

	"github.com/burstcache/burstcache/cacheserver/backing"
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
	for dir := path.Dir(p); ; dir = path.Dir(dir) {
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
		if err := d.store.SyncDir(ctx, dir); err != nil {
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
