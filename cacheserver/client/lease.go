package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/seqread"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// maxLeases is how many extents a client keeps leases on, per server: each
// pins a slot of the server's slab (engine.Lease). The server lends no more
// once half of its slots are pinned, and unread leases go back after
// leaseIdleSweeps, so the bound is for the client's table more than for the
// server. With 128, random 4 KiB reads over a 512 MiB file on two servers
// (256 extents each) took 240 us each, most going to the server for a
// lease that had been dropped; with 1024, 135-150 us.
const maxLeases = 1024

// leaseSweep is how often a client drops leases that went stale and
// reports the reads it served from leases, which count as the server's hits
// and as job I/O that its write-back yields to.
const leaseSweep = 50 * time.Millisecond

// leaseIdleSweeps is how many sweeps a lease may go unread before the
// client gives it back (5 s): a lease pins a slot, which the server can
// neither evict nor reuse, and a job that read a file once and moved on
// should not hold that capacity for the rest of its life.
const leaseIdleSweeps = 100

// leaseKey names an extent of a file, read through opens that found the
// backing file src (zero: unknown).
type leaseKey struct {
	path string
	idx  int64
	src  backing.FileID
}

// lease lets the client read [0, valid) of an extent at off of the slab
// file while the slot's generation and the server's epoch are gen and
// epoch and the connection that holds its pin is up.
type lease struct {
	key        leaseKey
	pin        hold
	lost       func() bool // the connection that holds the pin broke
	file       *os.File
	off        int64
	valid      int
	slot       int64
	gen, epoch uint64

	// Guarded by leases.mu.
	refs    int  // reads in progress
	dropped bool // out of the table; the last read releases the pin
	used    bool // read since the last eviction pass
	read    bool // read since the last sweep
	idle    int  // sweeps since it was last read
}

// leases are the leases a client holds on the extents of one server on
// its machine, and the server's slot generations, mapped read-only.
type leases struct {
	es     int64
	unpins *unpinner

	mu    sync.Mutex
	off   bool // the server offers no leases
	id    slabID
	mem   []byte
	words []uint64
	m     map[leaseKey]*lease
	stop  chan struct{}
	// streams follows sequential readers, by path (aheadOf).
	streams map[string]*seqread.Streams

	reads, bytes atomic.Int64
}

// current reports whether le may be read now.
func (ls *leases) currentLocked(le *lease) bool {
	return !le.lost() && le.slot+1 < int64(len(ls.words)) &&
		atomic.LoadUint64(&ls.words[le.slot+1]) == le.gen && atomic.LoadUint64(&ls.words[0]) == le.epoch
}

// heldThrough reports whether le, current when a read of its slot began,
// still is once the read is done: then the slot held the extent all along.
func (ls *leases) heldThrough(le *lease) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.currentLocked(le)
}

// epoch returns the server's epoch, or 0 before the generations are mapped.
func (ls *leases) epoch() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.words) == 0 {
		return 0
	}
	return atomic.LoadUint64(&ls.words[0])
}

// get returns a current lease on key, held for one read until release, or
// nil. A lease that went stale is dropped.
func (ls *leases) get(key leaseKey) *lease {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	le := ls.m[key]
	if le == nil {
		return nil
	}
	if !ls.currentLocked(le) {
		ls.dropLocked(le)
		return nil
	}
	le.refs++
	le.used, le.read = true, true
	return le
}

// release ends a read of le.
func (ls *leases) release(le *lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if le.refs--; le.refs == 0 && le.dropped {
		ls.unpins.add(le.pin)
	}
}

// dropLocked takes le out of the table; its pin goes when no read uses it.
func (ls *leases) dropLocked(le *lease) {
	if ls.m[le.key] == le {
		delete(ls.m, le.key)
	}
	if !le.dropped {
		le.dropped = true
		if le.refs == 0 {
			ls.unpins.add(le.pin)
		}
	}
}

// put adds le, which its caller reads once and then releases, and drops a
// lease that was not read lately when there are too many.
func (ls *leases) put(le *lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	le.refs = 1
	if ls.m == nil {
		ls.m = map[leaseKey]*lease{}
	}
	if old := ls.m[le.key]; old != nil {
		ls.dropLocked(old)
	}
	ls.m[le.key] = le
	for pass := 0; len(ls.m) > maxLeases && pass < 2; pass++ {
		for _, x := range ls.m {
			if len(ls.m) <= maxLeases {
				break
			}
			if x.refs == 0 && !x.used {
				ls.dropLocked(x)
			}
			x.used = false
		}
	}
	if ls.stop == nil {
		ls.stop = make(chan struct{})
		go ls.sweeper(ls.stop)
	}
}

// served counts a read served from a lease.
func (ls *leases) served(n int) {
	ls.reads.Add(1)
	ls.bytes.Add(int64(n))
}

// sweeper drops stale leases, so that the slots they pin go back to the
// server, and reports the reads served from leases. It ends when no lease
// is left; put starts it again.
func (ls *leases) sweeper(stop chan struct{}) {
	t := time.NewTicker(leaseSweep)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if ls.sweep(stop) {
			return
		}
	}
}

// sweep drops the leases that went stale or unread for leaseIdleSweeps,
// reports the reads served from leases, and reports whether the sweeper
// of stop is done: no lease is left.
func (ls *leases) sweep(stop chan struct{}) (done bool) {
	ls.mu.Lock()
	for _, le := range ls.m {
		if le.read {
			le.read, le.idle = false, 0
		} else {
			le.idle++
		}
		if !ls.currentLocked(le) || le.idle >= leaseIdleSweeps && le.refs == 0 {
			ls.dropLocked(le)
		}
	}
	done = len(ls.m) == 0 && ls.stop == stop
	if done {
		ls.stop = nil
	}
	ls.mu.Unlock()
	ls.unpins.count(ls.reads.Swap(0), ls.bytes.Swap(0))
	return done
}

// mapped reports whether the slot generations of the server whose slab is
// id are mapped, up to slot, mapping them first if they are not, are of
// another slab, or end before slot (the slab grew when the server
// restarted); false when the server offers no leases.
func (ls *leases) mapped(ctx context.Context, l *localSlab, id slabID, slot int64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.off {
		return false
	}
	if ls.words != nil && ls.id == id && slot+1 < int64(len(ls.words)) {
		return true
	}
	ls.resetLocked()
	f, _, err := wire.FetchFile(ctx, l.addr, l.creds, ident.Process(), wire.OpSlotGens, nil)
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) {
		ls.off = true
		return false
	}
	if err != nil {
		return false
	}
	defer f.Close()
	mem, err := mapWords(f)
	if err != nil {
		ls.off = true
		return false
	}
	ls.mem, ls.id = mem, id
	ls.words = unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), len(mem)/8)
	return slot+1 < int64(len(ls.words))
}

func mapWords(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 16 {
		return nil, fmt.Errorf("slot generation file of %d bytes: %w", st.Size(), wire.ErrProtocol)
	}
	return unix.Mmap(int(f.Fd()), 0, int(st.Size()&^7), unix.PROT_READ, unix.MAP_SHARED)
}

// resetLocked drops every lease and the mapping, for a server whose slab
// changed.
func (ls *leases) resetLocked() {
	for _, le := range ls.m {
		ls.dropLocked(le)
	}
	if ls.mem != nil {
		// Leases still being read hold no reference to the mapping: they
		// were checked before the read.
		_ = unix.Munmap(ls.mem)
		ls.mem, ls.words = nil, nil
	}
}

func (ls *leases) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.stop != nil {
		close(ls.stop)
		ls.stop = nil
	}
	ls.resetLocked()
	ls.off = true
}

// offered reports whether the server may lend leases: then even small
// reads go by readLocal, which asks for a lease on their extent and then
// serves them from it without asking the server.
func (ls *leases) offered() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return !ls.off
}

// refused notes a server that answered a request for a lease without
// knowing of leases.
func (ls *leases) refused() {
	ls.mu.Lock()
	ls.off = true
	ls.mu.Unlock()
}
