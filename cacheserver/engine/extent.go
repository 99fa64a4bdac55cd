package engine

import (
	"context"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/index"
	"github.com/burstcache/burstcache/cacheserver/seqread"
)

// extentState is the life cycle of an in-memory extent.
type extentState uint8

const (
	// loading: a placeholder whose creator holds mu and is filling a slot.
	loading extentState = iota
	// ready: the extent's slot holds its data.
	ready
	// dead: removed from its file; holders of a stale pointer retry.
	dead
)

// extent is one cached extent of a file.
//
// Locking: mu guards the content of the slot (readers and write-back take it
// shared, writers exclusively). state, slot and valid change only with mu held
// exclusively and Engine.mu held; lo, hi, gen, recovered and the list links
// change with Engine.mu held and mu held in either mode. Lock order:
// file.wbmu, then extent.mu, then Engine.mu (Engine.mu may only TryLock an
// extent).
type extent struct {
	f   *file
	idx int64
	mu  sync.RWMutex

	state  extentState
	slot   int32
	valid  int32 // bytes [0, valid) of the slot are data; past it, zeros
	lo, hi int32 // dirty byte range; lo == hi means clean
	gen    uint64
	// lastWrite orders write-back; dirtySince gives the write-back lag.
	lastWrite, dirtySince time.Time

	wb         bool // a write-back of this extent is in flight
	prefetched bool // copied up ahead of a sequential reader, not read yet
	failures   int
	retryAt    time.Time
	// out says that the dirty range at generation outGen is in the backing
	// file, which waits for the syncer's fsync (see WriteOut); wb is set.
	out    bool
	outGen uint64
	// recovered says that x is dirty as the index was found at Open, not
	// written since: the backing file may hold its dirty bytes already
	// (see writeBackRange).
	recovered bool

	list       *xlist
	prev, next *extent
}

func (x *extent) dirty() bool { return x.hi > x.lo }

// notOut reports whether x holds bytes that the backing file lacks: it is
// dirty, and not written back as it is now.
func (x *extent) notOut() bool { return x.dirty() && (!x.out || x.outGen != x.gen) }

func (x *extent) key() index.Key { return index.Key{Path: x.f.path, Index: x.idx} }

// file is the in-memory state of one file the engine knows.
type file struct {
	path    string
	extents map[int64]*extent

	// wbmu is held shared by write-back while it writes to the backing
	// file, and exclusively by operations that must not race with it
	// (trim, truncate, drop).
	wbmu sync.RWMutex

	// Guarded by Engine.mu.
	size        int64  // size the cache knows: writes, ExtendSize, truncate
	backingSize int64  // size of the backing file, as last seen
	statted     bool   // backingSize is known
	sizeGen     uint64 // bumped when write-back, truncate or trim changes backingSize
	exists      bool   // the backing file existed when statted
	shared      bool   // the backing file has more than one name: I/O passes through
	record      bool   // has a durable file record (counts against MaxFiles)
	named       bool   // the backing file's name was made durable since the engine learned of f (rule 8)
	cred        *ident.Cred
	doomed      int       // unlinks under way (Doom): no write-back, writes or size changes meanwhile
	doomedAt    time.Time // when the first of them began, or recovery found it
	// doomedID is the backing file's identity when the first doom began
	// (zero: unknown): a file created since under the same name is another.
	doomedID backing.FileID
	// unlinks are the ids of the unlinks that hold the doom, of those
	// that gave one (at most doomed).
	unlinks []uint64
	dead    bool
	// source is the identity of the backing file that f's extents were
	// copied from, or of a file that replaced it later (zero: unknown);
	// notSource are identities that reads named and the backing store
	// showed replaced already, and replacedBy one it showed current,
	// whose drop waits until f has no dirty extents (see ReadingFile).
	// blind says that extents were copied up while the source was
	// unknown: they may be of any file the path named since.
	source, replacedBy backing.FileID
	blind              bool
	// sourceRecord is the source the index holds for f, or that the
	// next commit writes (see sourceChangedLocked).
	sourceRecord backing.FileID
	// dirtyExtents counts the extents of f on the dirty list.
	dirtyExtents int
	notSource    []backing.FileID
	misses       seqread.Streams // readers of missing extents, for prefetch
	hits         seqread.Streams // readers of cached extents, for read-ahead
	prefetching  int             // prefetches of this file in flight
	// notReadAhead: the kernel does not read the backing file ahead of
	// copies (backing.RangeCopier), as the last prefetch found.
	notReadAhead bool
	runs         [2]*slotRun // runs of free slots for the next extents
	// copier says that a prefetch copier of f runs (copierRun): it takes
	// the runs queued for it in turn, through its one open of the backing
	// file, as copierCtx's identity. copierStale says that the file it
	// opened may not be the backing file any more (an invalidation).
	copier      bool
	copierStale bool
	copierCtx   context.Context
	queued      [][]claim
}

// xlist is an intrusive doubly linked list of extents: the clean list in
// least-recently-used order, the dirty list in least-recently-written order.
type xlist struct {
	head, tail *extent
	n          int
}

func (l *xlist) pushBack(x *extent) {
	x.list, x.prev, x.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = x
	} else {
		l.head = x
	}
	l.tail = x
	l.n++
}

func (l *xlist) remove(x *extent) {
	if x.list != l {
		return
	}
	if x.prev != nil {
		x.prev.next = x.next
	} else {
		l.head = x.next
	}
	if x.next != nil {
		x.next.prev = x.prev
	} else {
		l.tail = x.prev
	}
	x.list, x.prev, x.next = nil, nil, nil
	l.n--
}

func (l *xlist) moveToBack(x *extent) {
	l.remove(x)
	l.pushBack(x)
}
