package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/index"
	"github.com/burstcache/burstcache/cacheserver/slab"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// Engine is a write-back cache of a backing store's files on a local disk.
// Its methods are safe for concurrent use.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	backing backing.Store
	es      int64
	slab    *slab.Slab
	idx     *index.DB
	gens    *slotGens
	bufs    sync.Pool
	// incarnation is Incarnation.
	incarnation uint64
	// noKernelCopy is set once the kernel refused to copy from the backing
	// store into the slab: copy-ups pass through memory from then on.
	noKernelCopy atomic.Bool
	// copyUpTimes and writeBackTimes time the backing store (Stats).
	copyUpTimes, writeBackTimes opTimes

	mu        sync.Mutex
	cond      *sync.Cond // broadcast on any change waiters may wait for
	tun       Tunables
	files     map[string]*file
	nfile     int64              // files with a record that count against MaxFiles (Share)
	reserved  int64              // files reserved under MaxFiles (ReserveFile)
	dooms     map[*file]struct{} // doomed files
	resolving bool               // resolveDooms runs
	// overtaken keeps, for DoomTimeout, the unlinks whose end (NotRemoved)
	// came before their Doom, which then begins nothing (see Doom).
	overtaken map[unlinkKey]time.Time

	free        freeSlots          // slots no durable index entry refers to
	runs        map[*file]struct{} // files holding a run of free slots (slotRun)
	pendingFree []int32            // slots freed in memory, still named by the index
	pins        map[int32]int32    // slots ReadSpans handed out, with their pin counts
	pinnedFree  map[int32]struct{} // retired slots that wait for their pins
	used        int64              // slots referenced by extents
	clean       xlist
	dirty       xlist
	dirtyBytes  int64

	// Index changes not yet committed, and the committer's progress.
	idxExt    map[index.Key]struct{}
	idxFile   map[string]struct{}
	idxChange map[index.Change]struct{}
	idxSource map[string]struct{}
	// changesStored holds the change records the committed index holds;
	// changesWanted has the next commit write those queued (wantChanges).
	changesStored map[index.Change]struct{}
	changesWanted bool
	// durableDirty names, for each extent the committed index calls dirty,
	// the slot it names (see writeBack).
	durableDirty  map[index.Key]int32
	commitStarted uint64
	commitDone    uint64
	commitErr     error
	commitKick    chan struct{}
	// deviceErr, once set, wraps ErrCacheDevice: the slab's fdatasync
	// failed, and nothing commits again.
	deviceErr error

	// changedNames holds the backing directories whose entries calls
	// through the cache changed and no fsync made durable yet, and
	// nameSeq counts the changes (see NamesChanged).
	changedNames map[string]nameChange
	nameSeq      uint64
	// changedAttrs holds, alike, the backing files whose inodes calls
	// through the cache changed (see AttrsChanged).
	changedAttrs map[string]nameChange

	// unsynced holds the extents written back to backing files that wait
	// for the files' fsync (syncer) before they count as clean.
	unsynced map[*file][]wroteBack
	syncKick chan struct{}

	// lastIO is when the latest read or write of a job came in; background
	// write-back yields to jobs that do I/O (see yieldToJobs).
	lastIO       time.Time
	wbActive     bool
	flushAll     int
	spaceWaiters int
	// urgent counts the flushes of paths that a job's call waits for
	// (rename, EvictPath, Sync with Durability Backing): the syncer does
	// not yield to jobs while one runs.
	urgent     int
	urgentKick chan struct{}
	workers    int
	failStreak int

	window window
	st     counters

	closed bool
	active int
	stop   chan struct{}
	wg     sync.WaitGroup
}

// Open opens the cache directory cfg.Dir, creating it or recovering the
// state a previous engine left there, and starts the write-back workers and
// the index committer. Dirty extents found on recovery are written back.
func Open(cfg Config) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, log: cfg.Logger, backing: cfg.Backing, es: cfg.ExtentSize, tun: cfg.Tunables,
		files: map[string]*file{}, dooms: map[*file]struct{}{}, overtaken: map[unlinkKey]time.Time{}, idxExt: map[index.Key]struct{}{}, idxFile: map[string]struct{}{}, idxSource: map[string]struct{}{}, durableDirty: map[index.Key]int32{},
		commitKick: make(chan struct{}, 1), stop: make(chan struct{}),
		changedNames: map[string]nameChange{},
		changedAttrs: map[string]nameChange{},
		idxChange:    map[index.Change]struct{}{},
		unsynced:     map[*file][]wroteBack{}, syncKick: make(chan struct{}, 1), urgentKick: make(chan struct{}, 1),
		changesStored: map[index.Change]struct{}{},
	}
	e.cond = sync.NewCond(&e.mu)
	e.bufs.New = func() any { b := make([]byte, e.es); return &b }
	e.window.length = cfg.Tunables.WriteWindow.Length
	if err := e.openStore(); err != nil {
		return nil, err
	}
	e.start()
	e.dropRemovedDooms()
	return e, nil
}

// openStore opens the slab and the index and rebuilds the in-memory state.
func (e *Engine) openStore() error {
	if err := e.cfg.FS.MkdirAll(e.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("creating cache directory: %w", err)
	}
	idxPath := filepath.Join(e.cfg.Dir, "index.db")
	if err := e.reserveIndex(idxPath); err != nil {
		return err
	}
	idx, err := index.Open(idxPath, e.cfg.FS)
	if err != nil {
		return err
	}
	slots, err := e.geometry(idx)
	if err != nil {
		_ = idx.Close()
		return err
	}
	sl, err := slab.Open(e.cfg.FS, filepath.Join(e.cfg.Dir, "slab"), e.es, slots)
	if err != nil {
		_ = idx.Close()
		return err
	}
	gens, err := openSlotGens(e.cfg.FS, e.cfg.Dir, slots)
	if err != nil {
		_ = idx.Close()
		_ = sl.Close()
		return err
	}
	e.idx, e.slab, e.gens = idx, sl, gens
	err = e.recover()
	if err == nil {
		err = e.takeIncarnation()
	}
	if err != nil {
		_ = idx.Close()
		_ = sl.Close()
		_ = gens.close()
		return err
	}
	return nil
}

// indexReservePerSlot is the disk space reserved for the index per slot.
// The slab has its space from the start, and the index grows with what it
// records; on a disk that fills up (other files, or a slab as large as the
// disk) its commits would fail. An index of 20,000 extents of 4 KiB took
// 4 MiB (extents of files of 100 extents) to 16 MiB (a file per extent,
// with paths of 60 bytes) on this package's test machine: bbolt grows its
// file by doubling.
const indexReservePerSlot = 1 << 10

// reserveIndex reserves disk space for the index at path, by the slots the
// configuration asks for, past the end of its file so that bbolt sees no
// change. A new cache directory without that room is refused, with the
// space it needs; one holding an index already opens without it, since it
// may hold dirty data, and a failing commit says so later (Stats).
func (e *Engine) reserveIndex(path string) error {
	f, err := e.cfg.FS.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening index %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	r, ok := f.(vfs.Reserver)
	if !ok {
		return nil
	}
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("opening index %s: %w", path, err)
	}
	n := e.cfg.Capacity / e.es * indexReservePerSlot
	err = r.Reserve(0, n)
	switch {
	case err == nil:
		return nil
	case size == 0:
		return fmt.Errorf("reserving %d bytes for the cache index (%d per slot): %w", n, indexReservePerSlot, err)
	}
	e.log.Warn("Reserving disk space for the cache index failed; its commits may fail when the disk is full", "bytes", n, "err", err)
	return nil
}

// geometry checks the stored extent size and slot count against the
// configuration and records them in a new index.
func (e *Engine) geometry(idx *index.DB) (int64, error) {
	want := index.Meta{ExtentSize: e.es, Slots: e.cfg.Capacity / e.es}
	m, ok, err := idx.Meta()
	if err != nil {
		return 0, err
	}
	if ok && (m.ExtentSize != want.ExtentSize || m.Slots > want.Slots) {
		return 0, fmt.Errorf("%w: directory has %d slots of %d bytes, config asks %d of %d",
			ErrGeometry, m.Slots, m.ExtentSize, want.Slots, want.ExtentSize)
	}
	if !ok || m.Slots != want.Slots {
		// Durable step: growing the slab is safe in either order, since no
		// index entry names a slot past the old count.
		if err := idx.SetMeta(want); err != nil {
			return 0, err
		}
	}
	return want.Slots, nil
}

func (e *Engine) start() {
	e.wg.Add(3)
	go e.committer()
	go e.ticker()
	go e.syncer()
	e.mu.Lock()
	e.startWorkersLocked()
	e.mu.Unlock()
}

// Close stops the workers, commits the index and closes the cache
// directory. It does not flush: dirty data stays for the next Open.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.closed = true
	e.cond.Broadcast()
	for e.active > 0 {
		e.cond.Wait()
	}
	e.mu.Unlock()
	close(e.stop)
	e.wg.Wait()
	// The names and attributes changed are made durable now, and the
	// commit below deletes their records, so that a clean stop leaves
	// the next Open nothing to fsync; those whose fsync failed stay
	// recorded for it.
	nameErr := e.syncChanged()
	e.wantChanges()
	err := e.commitOnce()
	if err == nil {
		err = e.keepIncarnation()
	}
	e.log.Info("Closing cache engine", "dir", e.cfg.Dir, "commitErr", err, "namesErr", nameErr)
	return joinErr(err, nameErr, e.idx.Close(), e.slab.Close(), e.gens.close())
}

// enter admits an API call; leave ends it. Close waits for admitted calls.
func (e *Engine) enter() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.active++
	return nil
}

func (e *Engine) leave() {
	e.mu.Lock()
	e.active--
	// Only a closing engine waits for calls to end. Waking every waiter
	// (write-back workers among them) at the end of each call would cost
	// a sequential reader a wake-up and a context switch per call: 15-30%
	// more CPU time per byte on 1 MiB read hits (see Measurements).
	if e.active == 0 && e.closed {
		e.cond.Broadcast()
	}
	e.mu.Unlock()
}

// ticker wakes waiters periodically, so that write-back retries after its
// backoff and waits notice cancelled contexts.
func (e *Engine) ticker() {
	defer e.wg.Done()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.mu.Lock()
			e.cond.Broadcast()
			var old []*file
			if !e.resolving && !e.closed {
				old = e.oldDoomsLocked()
			}
			e.forgetOvertakenLocked()
			if len(old) > 0 {
				e.resolving = true
				e.wg.Add(1)
			}
			e.mu.Unlock()
			if len(old) > 0 {
				// It asks the backing store, which may be slow: not on
				// the ticker, which wakes waiters.
				go func() {
					defer e.wg.Done()
					for _, f := range old {
						e.resolveDoom(f)
					}
					e.mu.Lock()
					e.resolving = false
					e.mu.Unlock()
				}()
			}
		}
	}
}

// fileLocked returns the state of path, creating it.
func (e *Engine) fileLocked(path string) *file {
	f := e.files[path]
	if f == nil {
		f = &file{path: path, extents: map[int64]*extent{}}
		e.files[path] = f
	}
	return f
}

func (e *Engine) getBuf() *[]byte  { return e.bufs.Get().(*[]byte) }
func (e *Engine) putBuf(b *[]byte) { e.bufs.Put(b) }

// waitCtxLocked waits on cond, waking when ctx is done too.
func (e *Engine) waitCtxLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.closed {
		return ErrClosed
	}
	e.cond.Wait()
	return ctx.Err()
}
