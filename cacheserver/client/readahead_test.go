package client

import (
	"bytes"
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/seqread"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// TestLeaseReadAhead reads the extents a server holds of a file (every
// second one, as with two servers) in order, then out of order, and checks
// what aheadOf asks to read: in order, the slots of the leased extents
// ahead, in few ranges that merge consecutive slots, and never an extent
// without a current lease; out of order, nothing.
func TestLeaseReadAhead(t *testing.T) {
	const stride, extents = 2, 40
	ls, words, _ := leaseTable(extents)
	defer ls.close()
	es := ls.es
	for i := range int64(extents) {
		idx := i * stride
		// Extents 0..19 sit in slots 0..19 and 20..39 in slots 30..39,
		// then 20..29: two runs that are not contiguous.
		slot := i
		if i >= 20 {
			slot = (i-20+10)%20 + 20
		}
		le := &lease{key: leaseKey{path: "f", idx: idx}, pin: hold{id: uint64(i + 1)}, slot: slot, off: slot * es, epoch: 1, lost: up}
		ls.put(le)
		ls.release(le)
	}
	words[12+1]++ // the lease on extent 24 (slot 12) went stale

	for _, idx := range []int64{10, 4, 30, 8} {
		if _, _, got := ls.aheadOf(leaseKey{path: "f", idx: idx}, stride, true); len(got) != 0 {
			t.Fatalf("a read of extent %d out of order read ahead %v", idx, got)
		}
	}

	read := map[int64]bool{} // slab offsets read ahead
	calls, ranges := 0, 0
	for i := range int64(extents) {
		_, _, got := ls.aheadOf(leaseKey{path: "f", idx: i * stride}, stride, true)
		if len(got) > 0 {
			calls++
		}
		ranges += len(got)
		for _, r := range got {
			if r.off%es != 0 || int64(r.n)%es != 0 {
				t.Fatalf("range %+v is not whole slots", r)
			}
			for off := r.off; off < r.off+int64(r.n); off += es {
				read[off] = true
			}
		}
		// The same extent again (the next piece of it) asks for nothing.
		if _, _, again := ls.aheadOf(leaseKey{path: "f", idx: i * stride}, stride, true); len(again) != 0 {
			t.Fatalf("a second read of extent %d read ahead %v", i*stride, again)
		}
	}
	for i := int64(seqread.Confirm + 1); i < extents; i++ {
		slot := i
		if i >= 20 {
			slot = (i-20+10)%20 + 20
		}
		if want := slot != 12; read[slot*es] != want {
			t.Errorf("slot %d of extent %d read ahead: %v, want %v", slot, i*stride, read[slot*es], want)
		}
	}
	if calls > extents/leaseReadAhead*2+2 {
		t.Errorf("%d extents read in order asked for read-ahead %d times, want batches", extents, calls)
	}
	if ranges >= len(read)/2 {
		t.Errorf("%d slots read ahead in %d ranges, want consecutive slots merged", len(read), ranges)
	}
}

// TestLeaseReadsReadAhead reads a cached file again through leases, after
// its slots left the page cache: the first extents read bring the slots of
// the next ones into memory before they are read.
func TestLeaseReadsReadAhead(t *testing.T) {
	const extents = 24
	f := newWithFile(t, startLocal(t, t.TempDir()))
	ctx := context.Background()
	data := bytes.Repeat([]byte("r"), localExtent)
	buf := make([]byte, localExtent)
	for i := range int64(extents) {
		if _, err := f.WriteAt(ctx, "f", data, i*localExtent); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(extents) { // takes leases
		if _, err := f.ReadAt(ctx, "f", buf, i*localExtent); err != nil {
			t.Fatal(err)
		}
	}
	l := f.local[0]
	l.leases.mu.Lock()
	le := l.leases.m[leaseKey{path: "f", idx: 6, src: f.sourceOf("f")}]
	l.leases.mu.Unlock()
	if le == nil {
		t.Fatal("no lease on extent 6 after reading it")
	}
	slab := le.file
	if err := unix.Fdatasync(int(slab.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(slab.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if resident(t, slab, le.off) {
		t.Skip("the slab's file system keeps pages it was asked to drop")
	}
	for i := range int64(4) {
		if _, err := f.ReadAt(ctx, "f", buf, i*localExtent); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !resident(t, slab, le.off) {
		if time.Now().After(deadline) {
			t.Fatal("the slot of extent 6 is not in memory 10s after extents 0-3 were read in order")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// localCache is what a server's engine cache offers a client on its
// machine.
type localCache interface {
	server.Cache
	server.Leaser
	server.ReadAheader
}

// hintLog records the read-ahead hints a server gets.
type hintLog struct {
	localCache
	hints atomic.Int64
}

func (h *hintLog) ReadAheadAfter(path string, off int64) {
	h.hints.Add(1)
	h.localCache.ReadAheadAfter(path, off)
}

// TestSequentialReadsHintTheServer reads a file in order for the first
// time, so that every extent goes to the server for its lease: the client
// tells the server the reader goes in order, since the server would not
// know it once reads come from leases.
func TestSequentialReadsHintTheServer(t *testing.T) {
	var log *hintLog
	addr := startLocalWith(t, t.TempDir(), func(c server.Cache) server.Cache {
		log = &hintLog{localCache: c.(localCache)}
		return log
	})
	f := newWithFile(t, addr)
	ctx := context.Background()
	if _, err := f.WriteAt(ctx, "f", bytes.Repeat([]byte("h"), 8*localExtent), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, localExtent)
	for _, i := range []int64{5, 2, 7} {
		if _, err := f.ReadAt(ctx, "f", buf, i*localExtent); err != nil {
			t.Fatal(err)
		}
	}
	if n := log.hints.Load(); n != 0 {
		t.Fatalf("reads out of order sent %d read-ahead hints", n)
	}
	for i := range int64(8) {
		if _, err := f.ReadAt(ctx, "f", buf, i*localExtent); err != nil {
			t.Fatal(err)
		}
	}
	// The reader is sequential from extent seqread.Confirm on; extents 2, 5
	// and 7, read before, come from leases without asking the server.
	if n := log.hints.Load(); n < 3 {
		t.Fatalf("eight extents read in order sent %d read-ahead hints, want one each for extents 3, 4 and 6", n)
	}
}

// resident reports whether the extent at off of the slab is in memory.
func resident(t *testing.T, slab *os.File, off int64) bool {
	t.Helper()
	pages, in, err := vfs.Resident(slab, off, localExtent)
	if err != nil {
		t.Fatal(err)
	}
	return in == pages
}
