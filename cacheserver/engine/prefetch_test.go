package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/seqread"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// readLog is a backing store that records which extents were read.
type readLog struct {
	backing.Store
	es    int64
	mu    sync.Mutex
	reads map[int64]bool
}

func (r *readLog) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	r.mu.Lock()
	r.reads[off/r.es] = true
	r.mu.Unlock()
	return r.Store.ReadAt(ctx, p, b, off)
}

func (r *readLog) extents() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for idx := range r.reads {
		out = append(out, idx)
	}
	slices.Sort(out)
	return out
}

// TestPrefetchFollowsTheStride reads extents 0 and 3 of a file through an
// engine that holds every third extent, as one of three striped servers
// does: read-ahead must copy up the next extents of this server (6, 9), and
// never the neighbours that other servers hold.
func TestPrefetchFollowsTheStride(t *testing.T) {
	const stride = 3
	got := backingReadsOf(t, 64<<10, 12, 16, stride, []int64{0, 3})
	for _, idx := range got {
		if idx%stride != 0 {
			t.Fatalf("backing extents read %v: extent %d belongs to another server", got, idx)
		}
	}
	if !slices.Contains(got, 6) || !slices.Contains(got, 9) {
		t.Fatalf("backing extents read %v: want read-ahead of 6 and 9", got)
	}
}

// backingReadsOf reads, in the order given, extents of a file of extents
// extents through an engine of slots slots that holds every stride-th
// extent, and returns the extents read from the backing store once the
// read-ahead the reads started has ended: the reads start it before they
// return, and it holds the engine active until it ends.
func backingReadsOf(t *testing.T, es, extents, slots, stride int64, order []int64) []int64 {
	t.Helper()
	root := t.TempDir()
	log := &readLog{Store: backing.NewDir(root), es: es, reads: map[int64]bool{}}
	r := &rig{t: t, root: root}
	r.writeBacking("f", make([]byte, extents*es))
	r.cfg = Config{
		Dir: filepath.Join(t.TempDir(), "cache"), Backing: log, ExtentSize: es, Capacity: slots * es,
		Stride: stride, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	r.open()
	t.Cleanup(func() { r.e.Close() })
	buf := make([]byte, es)
	for _, idx := range order {
		if _, err := r.e.ReadAt(context.Background(), "f", buf, idx*es); err != nil {
			t.Fatalf("read extent %d: %v", idx, err)
		}
	}
	waitIdle(t, r)
	return log.extents()
}

// adviceLog is a file system whose files record the ranges the engine asks
// to read ahead.
type adviceLog struct {
	vfs.OS
	mu     sync.Mutex
	ranges [][2]int64 // offset and length
}

type advisedFile struct {
	vfs.File
	log *adviceLog
}

func (l *adviceLog) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := l.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return advisedFile{f, l}, nil
}

func (f advisedFile) WillNeed(off, n int64) {
	f.log.mu.Lock()
	f.log.ranges = append(f.log.ranges, [2]int64{off, n})
	f.log.mu.Unlock()
}

func (l *adviceLog) take() [][2]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.ranges
	l.ranges = nil
	return out
}

// TestReadAheadOfCachedExtents reads a file whose extents sit in consecutive
// slots. In order, the slots after the reader are asked for in a few large
// ranges that cover every slot the reader goes on to read; out of order,
// nothing is.
func TestReadAheadOfCachedExtents(t *testing.T) {
	const es, extents = 64 << 10, 24
	advice := &adviceLog{}
	r := newRig(t, es, 32, func(c *Config) { c.FS = advice })
	r.write("f", 0, make([]byte, extents*es))
	slots := make([]int32, extents)
	r.e.mu.Lock()
	for idx := range slots {
		slots[idx] = r.e.files["f"].extents[int64(idx)].slot
	}
	r.e.mu.Unlock()
	if !slices.IsSorted(slots) || slots[extents-1]-slots[0] != extents-1 {
		t.Fatalf("extents written in order sit in slots %v, want consecutive slots", slots)
	}
	advice.take()

	buf := make([]byte, es)
	for _, idx := range []int64{5, 2, 9, 14, 3, 20} {
		if _, err := r.e.ReadAt(context.Background(), "f", buf, idx*es); err != nil {
			t.Fatal(err)
		}
	}
	if got := advice.take(); len(got) != 0 {
		t.Errorf("reads out of order asked to read ahead %v, want nothing", got)
	}

	for idx := int64(0); idx < extents; idx++ {
		if _, err := r.e.ReadAt(context.Background(), "f", buf, idx*es); err != nil {
			t.Fatal(err)
		}
	}
	got := advice.take()
	covered := map[int32]bool{}
	for _, rg := range got {
		if rg[0]%es != 0 || rg[1]%es != 0 {
			t.Fatalf("read-ahead of [%d, +%d) is not whole slots", rg[0], rg[1])
		}
		for s := rg[0] / es; s < (rg[0]+rg[1])/es; s++ {
			covered[int32(s)] = true
		}
	}
	for idx := seqread.Confirm + 1; idx < extents; idx++ {
		if !covered[slots[idx]] {
			t.Errorf("the slot of extent %d (%d) was never read ahead; ranges %v", idx, slots[idx], got)
		}
	}
	if len(got) > extents/readAheadWindow*2+1 {
		t.Errorf("%d reads of extents in order asked for %d ranges (%v), want a few large ones", extents, len(got), got)
	}
}

// TestReadAheadAfterAClientsHint: a client that served the reads before
// from leases tells the engine the reader goes in order; the engine, which
// saw none of those reads, reads the next slots ahead.
func TestReadAheadAfterAClientsHint(t *testing.T) {
	const es, extents = 64 << 10, 12
	advice := &adviceLog{}
	r := newRig(t, es, 32, func(c *Config) { c.FS = advice })
	r.write("f", 0, make([]byte, extents*es))
	advice.take()
	buf := make([]byte, es)
	if _, err := r.e.ReadAt(context.Background(), "f", buf, 5*es); err != nil {
		t.Fatal(err)
	}
	if got := advice.take(); len(got) != 0 {
		t.Fatalf("a lone read asked to read ahead %v", got)
	}
	r.e.ReadAheadAfter("f", 5*es)
	got := advice.take()
	if len(got) == 0 {
		t.Fatal("a hint of a sequential reader read nothing ahead")
	}
	r.e.mu.Lock()
	want := r.e.files["f"].extents[6].slot
	r.e.mu.Unlock()
	if got[0][0] != int64(want)*es {
		t.Errorf("read-ahead starts at %d, want the slot of extent 6 (%d)", got[0][0], int64(want)*es)
	}
	r.e.ReadAheadAfter("missing", 0) // no file: nothing, and no panic
}

// TestPrefetchUsesTheFilesRun reads a file in order while its run holds
// the slots of its next extents and other writers have taken every slot of
// the free list: read-ahead must still copy up the next extents into the
// run, since slots reserved in runs count as free.
func TestPrefetchUsesTheFilesRun(t *testing.T) {
	const es, slots = 4 << 10, 128
	r := newRig(t, es, slots, func(c *Config) {
		c.Tunables.DirtyHigh, c.Tunables.DirtyLow = 100, 90
		c.Tunables.EvictHigh, c.Tunables.EvictLow = 100, 90
	})
	r.writeBacking("c", make([]byte, 8*es))
	ctx := context.Background()
	buf := make([]byte, es)
	if _, err := r.e.ReadAt(ctx, "c", buf, 0); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, es)
	for i := int64(0); ; i++ {
		r.e.mu.Lock()
		free := r.e.free.len()
		r.e.mu.Unlock()
		if free == 0 {
			break
		}
		r.write("filler", i*es, data)
	}
	r.e.mu.Lock()
	run := r.e.files["c"].runs != [2]*slotRun{}
	r.e.mu.Unlock()
	if !run {
		t.Fatal("the reader's run of slots went back before the test could read")
	}
	if _, err := r.e.ReadAt(ctx, "c", buf, es); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.e.mu.Lock()
		x := r.e.files["c"].extents[2]
		ready := x != nil && x.state == ready
		r.e.mu.Unlock()
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("extent 2 was not read ahead after extents 0 and 1 were read in order")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPrefetchFollowsInterleavedReaders reads two parts of one file in
// turn, as two processes that each read their own part of a shared file
// do: each reader in order gets the extents after it copied up ahead.
func TestPrefetchFollowsInterleavedReaders(t *testing.T) {
	got := backingReadsOf(t, 64<<10, 40, 64, 1, []int64{0, 20, 1, 21})
	for _, want := range []int64{2, 22} {
		if !slices.Contains(got, want) {
			t.Errorf("backing extents read %v: want read-ahead of %d", got, want)
		}
	}
}

// copyLog is a backing directory that records the copies into the cache:
// the offsets copied one at a time (CopyRange), and those copied through
// each open of CopyRanges, in the order copied. With notReadAhead it says
// that the kernel does not read its files ahead, as for a FUSE file system
// that opens them for direct I/O, and each copy through CopyRanges takes
// delay more, as from remote storage; it then records how many copies
// through one open were in flight at most, and the fsuid of the thread of
// each copy.
type copyLog struct {
	*backing.Dir
	notReadAhead bool
	delay        time.Duration
	// failOnce, if set, makes the first copy through CopyRanges at each
	// offset it names fail halfway.
	failOnce map[int64]bool

	mu          sync.Mutex
	singles     []int64
	runs        [][]int64
	inFlight    map[int]int // copies in flight, by run
	maxInFlight int
	fsuids      []uint32
	runUIDs     [][]uint32 // the fsuid of each copy, by run
	// gate, if set, holds the copies through CopyRanges at the offsets it
	// names until their channel is closed; gated receives each such offset
	// as its copy begins to wait.
	gate  map[int64]chan struct{}
	gated chan int64
}

func (l *copyLog) CopyRange(ctx context.Context, p string, off int64, dst int, dstOff, n int64) (int64, error) {
	l.mu.Lock()
	l.singles = append(l.singles, off)
	l.mu.Unlock()
	return l.Dir.CopyRange(ctx, p, off, dst, dstOff, n)
}

func (l *copyLog) CopyRanges(ctx context.Context, p string, fn func(backing.CopyFunc, bool) error) error {
	l.mu.Lock()
	run := len(l.runs)
	l.runs = append(l.runs, nil)
	l.runUIDs = append(l.runUIDs, nil)
	l.mu.Unlock()
	return l.Dir.CopyRanges(ctx, p, func(cp backing.CopyFunc, readsAhead bool) error {
		return fn(func(off int64, dst int, dstOff, n int64) (int64, error) {
			// setfsuid with an id that is not one changes nothing and
			// returns the thread's fsuid.
			uid, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
			l.mu.Lock()
			l.runs[run] = append(l.runs[run], off)
			l.fsuids = append(l.fsuids, uint32(uid))
			l.runUIDs[run] = append(l.runUIDs[run], uint32(uid))
			if l.inFlight == nil {
				l.inFlight = map[int]int{}
			}
			l.inFlight[run]++
			l.maxInFlight = max(l.maxInFlight, l.inFlight[run])
			l.mu.Unlock()
			defer func() {
				l.mu.Lock()
				l.inFlight[run]--
				l.mu.Unlock()
			}()
			time.Sleep(l.delay)
			if g := l.gate[off]; g != nil {
				l.gated <- off
				<-g
			}
			l.mu.Lock()
			fail := l.failOnce[off]
			delete(l.failOnce, off)
			l.mu.Unlock()
			if fail {
				copied, _ := cp(off, dst, dstOff, n/2)
				return copied, errInjected
			}
			return cp(off, dst, dstOff, n)
		}, readsAhead && !l.notReadAhead)
	})
}

// readInOrder reads the whole of file p of r, extent by extent, as ctx,
// and checks each extent against want.
func readInOrder(t *testing.T, ctx context.Context, r *rig, p string, want []byte, es int64) {
	t.Helper()
	buf := make([]byte, es)
	for off := int64(0); off < int64(len(want)); off += es {
		if _, err := r.e.ReadAt(ctx, p, buf, off); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(buf, want[off:off+es]) {
			t.Fatalf("extent %d read wrong bytes", off/es)
		}
	}
	waitIdle(t, r)
}

// copyLogRig opens an engine of es-byte extents with room for twice
// extents, over log, which it points at a fresh backing directory, and
// writes there a file "f" of extents extents whose bytes depend on seed.
func copyLogRig(t *testing.T, log *copyLog, es, extents int64, seed int) (*rig, []byte) {
	t.Helper()
	root := t.TempDir()
	log.Dir = backing.NewDir(root)
	r := newRig(t, es, 2*extents, func(c *Config) { c.Backing = log })
	r.root = root
	want := make([]byte, extents*es)
	for i := range want {
		want[i] = byte(int64(i)/es*int64(seed) + int64(i*seed))
	}
	r.writeBacking("f", want)
	return r, want
}

// TestPrefetchCopiesRunsThroughOneOpen reads a file in order. The reader
// copies up the two extents that make it sequential, and no other: read-ahead
// claims the next extents before the read returns. Read-ahead copies the
// rest in runs of at least half its window, each in file order through one
// open of the backing file, so that the kernel reads the backing file ahead
// as for one reader, and a parallel file system sees one open per run
// rather than one per extent.
func TestPrefetchCopiesRunsThroughOneOpen(t *testing.T) {
	const es, extents = 64 << 10, 40
	log := &copyLog{}
	r, want := copyLogRig(t, log, es, extents, 7)
	readInOrder(t, context.Background(), r, "f", want, es)
	log.mu.Lock()
	defer log.mu.Unlock()
	if !slices.Equal(log.singles, []int64{0, es}) {
		t.Errorf("copied one at a time: offsets %v, want only the reader's first two extents", log.singles)
	}
	copied := map[int64]bool{}
	for _, run := range log.runs {
		if !slices.IsSorted(run) {
			t.Errorf("a run copied offsets %v, not in file order", run)
		}
		if len(run) < prefetchWindow/2 && run[len(run)-1] != (extents-1)*es {
			t.Errorf("a run copied %d extents (%v), want at least %d", len(run), run, prefetchWindow/2)
		}
		for _, off := range run {
			if copied[off] {
				t.Errorf("offset %d copied twice", off)
			}
			copied[off] = true
		}
	}
	if len(copied) != extents-2 {
		t.Errorf("runs copied %d extents, want the %d after the first two", len(copied), extents-2)
	}
}

// TestPrefetchCopiesAFileThroughOneOpenWhileItsReaderWaits reads a file in
// order from a store much slower than the reader (10 ms a copy, even under
// the race detector), so that the reader waits for read-ahead: the runs of read-ahead must then all go through one open of
// the backing file, so that the kernel's read-ahead of it goes on growing
// as for one reader of the whole file rather than starting anew at each
// run, and a parallel file system sees one open for the file.
func TestPrefetchCopiesAFileThroughOneOpenWhileItsReaderWaits(t *testing.T) {
	const es, extents = 64 << 10, 40
	log := &copyLog{delay: 10 * time.Millisecond}
	r, want := copyLogRig(t, log, es, extents, 5)
	readInOrder(t, context.Background(), r, "f", want, es)
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.runs) != 1 || len(log.runs[0]) != extents-2 || !slices.IsSorted(log.runs[0]) {
		t.Errorf("read-ahead opened the file %d times, copying %v: want one open copying the %d extents after the first two in order",
			len(log.runs), log.runs, extents-2)
	}
}

// TestPrefetchCopiesAsEachReader reads two parts of a file in order as two
// identities at once, far enough apart that each reader has read-ahead of
// its own: every copy of each reader's read-ahead must run as that reader,
// never through an open the other made, so that the backing store checks
// each identity's own access.
func TestPrefetchCopiesAsEachReader(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as two identities")
	}
	const es, extents, part = 64 << 10, 60, 20
	log := &copyLog{delay: 2 * time.Millisecond}
	r, want := copyLogRig(t, log, es, extents, 9)
	for _, d := range []string{filepath.Dir(r.root), r.root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Reader i reads extents [40*i, 40*i+part), and its read-ahead reaches
	// at most prefetchWindow extents further.
	uids := []uint32{1001, 1002}
	var wg sync.WaitGroup
	for i, uid := range uids {
		ctx := ident.NewContext(context.Background(), ident.Cred{UID: uid, GID: uid})
		wg.Go(func() {
			buf := make([]byte, es)
			for idx := int64(40 * i); idx < int64(40*i+part); idx++ {
				if _, err := r.e.ReadAt(ctx, "f", buf, idx*es); err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(buf, want[idx*es:(idx+1)*es]) {
					t.Errorf("extent %d read wrong bytes", idx)
					return
				}
			}
		})
	}
	wg.Wait()
	waitIdle(t, r)
	log.mu.Lock()
	defer log.mu.Unlock()
	for i, run := range log.runs {
		for j, off := range run {
			if want := uids[off/es/40]; log.runUIDs[i][j] != want {
				t.Errorf("extent %d was copied as uid %d, want its reader's %d", off/es, log.runUIDs[i][j], want)
			}
		}
	}
}

// TestInvalidationReopensForReadAhead invalidates a file replaced on the
// backing store while a read-ahead copier of it runs, through an open of the
// old file: read-ahead claimed after the invalidation began must open the
// backing file anew rather than join that copier, or it would copy the old
// file's bytes after the invalidation that was to forget them.
func TestInvalidationReopensForReadAhead(t *testing.T) {
	const es, extents = 64 << 10, 40
	release := make(chan struct{})
	log := &copyLog{gate: map[int64]chan struct{}{6 * es: release}, gated: make(chan int64, 1)}
	r, v1 := copyLogRig(t, log, es, extents, 11)
	ctx := context.Background()

	// A reader in order: read-ahead's copier opens the file and waits at
	// extent 6, and the reader waits for it there.
	reader := make(chan error, 1)
	go func() {
		buf := make([]byte, es)
		for off := int64(0); off < 10*es; off += es {
			if _, err := r.e.ReadAt(ctx, "f", buf, off); err != nil {
				reader <- err
				return
			}
		}
		reader <- nil
	}()
	<-log.gated

	v2 := bytes.Repeat([]byte{0xb2}, len(v1))
	r.writeBacking("f.new", v2)
	if err := os.Rename(filepath.Join(r.root, "f.new"), filepath.Join(r.root, "f")); err != nil {
		t.Fatal(err)
	}
	invalidated := make(chan error, 1)
	go func() { invalidated <- r.e.InvalidatePath(ctx, "f") }()
	waitFor(t, func() bool {
		r.e.mu.Lock()
		defer r.e.mu.Unlock()
		return r.e.files["f"].copierStale
	})

	// Another reader, further on: its read-ahead claims extents 22 on.
	buf := make([]byte, es)
	for off := int64(20 * es); off < 22*es; off += es {
		if _, err := r.e.ReadAt(ctx, "f", buf, off); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := errors.Join(<-reader, <-invalidated); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, r)
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, off := range log.runs[0] {
		if off >= 20*es {
			t.Errorf("extent %d, claimed after the invalidation began, was copied through the open made before it (copies %v)", off/es, log.runs[0])
		}
	}
	for off := int64(20 * es); off < 30*es; off += es {
		if _, err := r.e.ReadAt(ctx, "f", buf, off); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(buf, v2[off:off+es]) {
			t.Errorf("extent %d reads the old file's bytes after the invalidation", off/es)
		}
	}
}

// TestPrefetchCopiesAtOnceWhereTheKernelDoesNotReadAhead reads a file in
// order from a store that does not read files ahead and takes a while for
// each copy, as remote storage behind a FUSE file system does: read-ahead
// must have several copies through one open in flight at once, each extent
// copied once, and, as root, every copy must run as the reader, on
// whichever thread it runs.
func TestPrefetchCopiesAtOnceWhereTheKernelDoesNotReadAhead(t *testing.T) {
	const es, extents = 64 << 10, 40
	log := &copyLog{notReadAhead: true, delay: 5 * time.Millisecond}
	r, want := copyLogRig(t, log, es, extents, 3)
	ctx := context.Background()
	reader := uint32(os.Geteuid())
	if reader == 0 {
		reader = 1000
		for _, d := range []string{filepath.Dir(r.root), r.root} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		ctx = ident.NewContext(ctx, ident.Cred{UID: reader, GID: reader})
	}
	readInOrder(t, ctx, r, "f", want, es)

	log.mu.Lock()
	defer log.mu.Unlock()
	if log.maxInFlight < 2 || log.maxInFlight > copyStreams {
		t.Errorf("at most %d copies through one open were in flight, want 2 to %d", log.maxInFlight, copyStreams)
	}
	copied := map[int64]bool{}
	for _, run := range log.runs {
		for _, off := range run {
			if copied[off] {
				t.Errorf("offset %d copied twice", off)
			}
			copied[off] = true
		}
	}
	if len(copied)+len(log.singles) != extents {
		t.Errorf("runs copied %d extents and the reader %d, want %d in all", len(copied), len(log.singles), extents)
	}
	for _, uid := range log.fsuids {
		if uid != reader {
			t.Fatalf("a copy ran with fsuid %d, want the reader's %d", uid, reader)
		}
	}
}

// TestFailedCopiesOfAStreamCostOnlyAMiss fails some copies of read-ahead
// streams halfway: the reader must still read the right bytes, and each
// extent whose copy failed must be copied again, by a later read-ahead or
// by the reader.
func TestFailedCopiesOfAStreamCostOnlyAMiss(t *testing.T) {
	const es, extents = 64 << 10, 40
	failed := map[int64]bool{}
	for idx := int64(4); idx < extents; idx += 5 {
		failed[idx*es] = true
	}
	log := &copyLog{notReadAhead: true, failOnce: maps.Clone(failed)}
	r, want := copyLogRig(t, log, es, extents, 5)
	readInOrder(t, context.Background(), r, "f", want, es)

	log.mu.Lock()
	defer log.mu.Unlock()
	copies := map[int64]int{}
	for _, off := range log.singles {
		copies[off]++
	}
	for _, run := range log.runs {
		for _, off := range run {
			copies[off]++
		}
	}
	for off := range failed {
		switch {
		case log.failOnce[off]:
			// Never tried by read-ahead: the reader copied it up.
		case copies[off] < 2:
			t.Errorf("extent %d failed its read-ahead copy and was not copied again", off/es)
		}
	}
	if len(log.failOnce) == len(failed) {
		t.Error("no read-ahead copy failed")
	}
	if s := r.e.Stats(); s.CachedBytes != extents*es {
		t.Errorf("%d bytes cached after reading the file, want all %d", s.CachedBytes, extents*es)
	}
}

// waitIdle waits until no call or read-ahead of r's engine is under way.
func waitIdle(t *testing.T, r *rig) {
	t.Helper()
	waitFor(t, func() bool {
		r.e.mu.Lock()
		defer r.e.mu.Unlock()
		return r.e.active == 0
	})
}
