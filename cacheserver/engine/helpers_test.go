package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// rig is an engine over a temporary backing directory.
type rig struct {
	t    testing.TB
	cfg  Config
	root string // backing directory
	// store is the backing directory under faulty; it loses what no
	// fsync covered when told its node crashed.
	store  *forgetful
	faulty *backing.Faulty
	e      *Engine
	// dooms holds the id of the last unlink that doomed each path (see
	// doom).
	dooms map[string]uint64
}

// newRig opens an engine of slots extents of es bytes; mod adjusts the
// configuration.
func newRig(t testing.TB, es int64, slots int64, mod func(*Config)) *rig {
	t.Helper()
	return newRigOver(t, t.TempDir(), es, slots, mod)
}

// newRigOver is newRig over the backing directory root.
func newRigOver(t testing.TB, root string, es int64, slots int64, mod func(*Config)) *rig {
	t.Helper()
	r := &rig{t: t, root: root}
	r.store = newForgetful(r.root)
	r.faulty = backing.NewFaulty(r.store)
	r.cfg = Config{
		Dir: filepath.Join(t.TempDir(), "cache"), Backing: r.faulty, ExtentSize: es, Capacity: es * slots,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&r.cfg)
	}
	r.open()
	t.Cleanup(func() {
		if r.e != nil {
			r.e.Close()
		}
	})
	return r
}

func (r *rig) open() {
	r.t.Helper()
	e, err := Open(r.cfg)
	if err != nil {
		r.t.Fatalf("Open: %v", err)
	}
	r.e = e
}

// restart closes the engine (without flushing) and opens it again.
func (r *rig) restart() {
	r.t.Helper()
	if err := r.e.Close(); err != nil {
		r.t.Fatalf("Close: %v", err)
	}
	r.open()
}

func (r *rig) write(p string, off int64, data []byte) {
	r.t.Helper()
	n, err := r.e.WriteAt(context.Background(), p, data, off)
	if err != nil || n != len(data) {
		r.t.Fatalf("WriteAt(%s, %d, %d bytes) = %d, %v", p, off, len(data), n, err)
	}
}

func (r *rig) backingFile(p string) []byte {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, p))
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	return b
}

// readAll reads path through the engine up to its size.
func (r *rig) readAll(p string) []byte {
	r.t.Helper()
	ctx := context.Background()
	size, err := r.e.Size(ctx, p)
	if err != nil {
		r.t.Fatalf("Size(%s): %v", p, err)
	}
	b := make([]byte, size)
	n, err := r.e.ReadAt(ctx, p, b, 0)
	if int64(n) != size || (err != nil && n != len(b)) {
		r.t.Fatalf("ReadAt(%s) = %d, %v; size %d", p, n, err, size)
	}
	return b
}

func (r *rig) writeBacking(p string, data []byte) {
	r.t.Helper()
	full := filepath.Join(r.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// memoryOnly hides the optional backing.RangeCopier of s, so that the
// engine copies up through memory, as it does over a Store that cannot copy
// in the kernel.
func memoryOnly(s backing.Store) backing.Store { return struct{ backing.Store }{s} }

// withoutReadAhead returns s, a backing.RangeCopier, saying that the kernel
// reads none of its files ahead, as for a FUSE file system that opens them
// for direct I/O.
func withoutReadAhead(s backing.Store) backing.Store { return notReadAhead{s.(*backing.Faulty)} }

type notReadAhead struct{ *backing.Faulty }

func (n notReadAhead) CopyRanges(ctx context.Context, p string, fn func(backing.CopyFunc, bool) error) error {
	return n.Faulty.CopyRanges(ctx, p, func(cp backing.CopyFunc, _ bool) error { return fn(cp, false) })
}

// backingReads counts the calls that read the backing store: reads, and
// copies into the slab made in the kernel.
func (r *rig) backingReads() int64 {
	return r.faulty.Calls(backing.OpReadAt) + r.faulty.Calls(backing.OpCopyRange)
}

// trackedFiles returns how many files the engine keeps state for.
func (r *rig) trackedFiles() int {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	return len(r.e.files)
}

// committed reports whether every index change made so far is durable:
// none waits, and no commit is in flight (commitPending turns false as soon
// as a commit takes its batch, before the batch is durable).
func (e *Engine) committed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.idxExt) == 0 && len(e.idxFile) == 0 && len(e.idxSource) == 0 && len(e.pendingFree) == 0 && e.commitDone == e.commitStarted
}

// crashable sets c up for crash tests: the cache directory on fsys, and
// the periodic commit an hour away, so that only the calls under test
// make anything durable.
func crashable(t *testing.T, c *Config, fsys *vfs.Crashable) {
	c.Dir = filepath.Join(shmDir(t), "cache")
	c.FS = fsys
	c.CommitInterval = time.Hour
}

// crash crashes fsys, losing what was not synced, and opens the engine
// again on the real file system.
func (r *rig) crash(fsys *vfs.Crashable) {
	r.t.Helper()
	fsys.Crash()
	r.e.Close()
	r.cfg.FS = vfs.OS{}
	r.open()
}
