package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/test/smalldisk"
)

// TestFullCacheDiskFailsCommitsUntilItHasRoom fills the disk of the cache
// directory, as another tenant of a node's disk can: the slab has its space
// from the start, but the index grows with the files it records, and its
// commits fail. The failure shows in Stats, Sync and the writers that need
// freed slots get ENOSPC, and nothing is lost: once the disk has room
// again, the commits that failed are made, and a restart and a flush find
// every byte.
func TestFullCacheDiskFailsCommitsUntilItHasRoom(t *testing.T) {
	disk := smalldisk.Mount(t, "8m")
	r := newRig(t, 4096, 256, func(c *Config) { c.Dir = filepath.Join(disk, "cache") })
	ctx := context.Background()
	smalldisk.Fill(t, filepath.Join(disk, "other-tenant"))

	name := func(i int) string { return fmt.Sprintf("dir/a-file-with-a-long-name-%05d", i) }
	data := func(i int) []byte { return []byte(fmt.Sprintf("data of file %d", i)) }
	written := 0
	var werr error
	for ; written < 4000; written++ {
		if _, werr = r.e.WriteAt(ctx, name(written), data(written), 0); werr != nil {
			break
		}
	}
	if werr == nil {
		t.Fatal("4000 files fitted in the index on a full disk; the test needs more")
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("a write that needs a slot freed by a failed commit = %v, want ENOSPC", werr)
	}
	if err := r.e.Sync(ctx, name(0)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Sync on a full disk = %v, want ENOSPC", err)
	}
	s := r.e.Stats()
	if !strings.Contains(s.IndexError, "no space left") || s.IndexCommitFailures == 0 || s.DeviceError != "" {
		t.Fatalf("Stats on a full disk: IndexError %q, IndexCommitFailures %d, DeviceError %q", s.IndexError, s.IndexCommitFailures, s.DeviceError)
	}

	if err := os.Remove(filepath.Join(disk, "other-tenant")); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Sync(ctx, name(0)); err != nil {
		t.Fatalf("Sync once the disk has room: %v", err)
	}
	if s := r.e.Stats(); s.IndexError != "" {
		t.Fatalf("IndexError after a commit succeeded: %q", s.IndexError)
	}
	if _, err := r.e.WriteAt(ctx, name(written), data(written), 0); err != nil {
		t.Fatalf("a write once the disk has room: %v", err)
	}
	written++

	r.restart()
	for i := range written {
		if got := r.readAll(name(i)); !bytes.Equal(got, data(i)) {
			t.Fatalf("%s after a restart: %q, want %q", name(i), got, data(i))
		}
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	for i := range written {
		if got := r.backingFile(name(i)); !bytes.Equal(got, data(i)) {
			t.Fatalf("backing %s = %q, want %q", name(i), got, data(i))
		}
	}
}

// TestWriterGetsTheBackingStoresRefusal fills the cache with dirty data
// that the backing store, a real file system that is full, refuses. A new
// write that needs space then fails with the backing store's ENOSPC, as it
// would have writing there directly, instead of waiting for ever; reads
// of data not cached read the backing store without caching it; a page
// that a client's kernel writes back (Accepted) goes on waiting, since it
// cannot be retried, and an open whose writes such a kernel gathers gets
// the error at open. Nothing dirty is dropped: once the backing store has
// room, a flush writes every byte back, and the refused write succeeds
// when it is made again.
func TestWriterGetsTheBackingStoresRefusal(t *testing.T) {
	pfs := smalldisk.Mount(t, "1m")
	const es, slots = 4096, 16
	r := newRigOver(t, pfs, es, slots, func(c *Config) {
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 50, DirtyLow: 25}
	})
	ctx := context.Background()
	input := bytes.Repeat([]byte("input "), es)
	r.writeBacking("in/data", input)
	smalldisk.Fill(t, filepath.Join(pfs, "other-files"))

	want := map[string][]byte{}
	for i := range slots {
		p := fmt.Sprintf("out/%02d", i)
		want[p] = bytes.Repeat([]byte{byte('a' + i)}, es)
		r.write(p, 0, want[p])
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := r.e.WriteAt(wctx, "out/one-more", []byte("more"), 0)
	if !errors.Is(err, syscall.ENOSPC) || wctx.Err() != nil {
		t.Fatalf("a write into a cache full of data the backing store refuses = %v (waited %v), want ENOSPC", err, wctx.Err())
	}
	// Reads of data the cache does not hold go to the backing store.
	got := make([]byte, len(input))
	if n, err := r.e.ReadAt(wctx, "in/data", got, 0); err != nil || !bytes.Equal(got[:n], input) {
		t.Fatalf("a read of data not cached, with no room to cache it: %d bytes, %v", n, err)
	}
	if _, _, err := r.e.ReadSpans(wctx, "in/data", 0, es); !errors.Is(err, ErrNoSpans) {
		t.Fatalf("ReadSpans of data not cached, with no room to cache it = %v, want ErrNoSpans", err)
	}
	if err := r.e.Preload(wctx, "in"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a preload with no room in the cache = %v, want the backing store's ENOSPC", err)
	}
	// A job whose kernel gathers its writes learns of it at open: its
	// writes would come Accepted, and wait.
	if err := r.e.AdmitWriter("out/gathered", true); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("AdmitWriter of a gathered open = %v, want the backing store's ENOSPC", err)
	}
	if err := r.e.AdmitWriter("out/plain", false); err != nil {
		t.Fatalf("AdmitWriter of an open whose writes are not gathered = %v, want none (its writes get the error)", err)
	}
	actx, cancel := context.WithTimeout(Accepted(ctx), 300*time.Millisecond)
	defer cancel()
	if _, err := r.e.WriteAt(actx, "out/from-a-page-cache", []byte("page"), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an Accepted write into the same cache = %v, want it to wait (until its deadline)", err)
	}
	if s := r.e.Stats(); s.DirtyBytes != slots*es || !s.WriteBackFailing || !s.WriteBackRefused {
		t.Fatalf("after the refusals: %d dirty bytes (want %d), WriteBackFailing %v, WriteBackRefused %v", s.DirtyBytes, slots*es, s.WriteBackFailing, s.WriteBackRefused)
	}

	if err := os.Remove(filepath.Join(pfs, "other-files")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.e.WriteAt(ctx, "out/one-more", []byte("more"), 0); err != nil {
		t.Fatalf("the refused write, made again once the backing store has room: %v", err)
	}
	want["out/one-more"] = []byte("more")
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush once the backing store has room: %v", err)
	}
	if err := r.e.AdmitWriter("out/gathered", true); err != nil {
		t.Fatalf("AdmitWriter of a gathered open once the backing store has room: %v", err)
	}
	if s := r.e.Stats(); s.WriteBackFailing || s.WriteBackRefused {
		t.Fatalf("after a flush that succeeded: WriteBackFailing %v, WriteBackRefused %v", s.WriteBackFailing, s.WriteBackRefused)
	}
	for p, data := range want {
		if got := r.backingFile(p); !bytes.Equal(got, data) {
			t.Errorf("backing %s = %.20q (%d bytes), want %.20q", p, got, len(got), data)
		}
	}
}

// TestIndexHasItsRoomOnAFullDisk: the space the index needs for what the
// slots can hold is reserved when the cache directory is made, so a disk
// that another tenant fills afterwards does not fail its commits.
func TestIndexHasItsRoomOnAFullDisk(t *testing.T) {
	disk := smalldisk.Mount(t, "8m")
	const slots = 256
	r := newRig(t, 4096, slots, func(c *Config) { c.Dir = filepath.Join(disk, "cache") })
	ctx := context.Background()
	smalldisk.Fill(t, filepath.Join(disk, "other-tenant"))
	for i := range slots {
		p := fmt.Sprintf("dir/a-file-with-a-long-name-%05d", i)
		if _, err := r.e.WriteAt(ctx, p, []byte("data"), 0); err != nil {
			t.Fatalf("write %d on a full disk: %v", i, err)
		}
		if err := r.e.Sync(ctx, p); err != nil {
			t.Fatalf("Sync of file %d on a full disk: %v", i, err)
		}
	}
}

// TestNewCacheDirectoryWithoutRoomForItsIndex: a new cache directory on a
// disk that cannot hold the index's reservation is refused at once, with
// the space it needs, rather than failing commits later.
func TestNewCacheDirectoryWithoutRoomForItsIndex(t *testing.T) {
	disk := smalldisk.Mount(t, "128k")
	cfg := Config{Dir: filepath.Join(disk, "cache"), Backing: backing.NewDir(t.TempDir()), ExtentSize: 4096, Capacity: 256 * 4096}
	e, err := Open(cfg)
	if err == nil {
		e.Close()
		t.Fatal("Open on a disk without room for the index succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "cache index") || !strings.Contains(err.Error(), fmt.Sprint(256*indexReservePerSlot)) {
		t.Fatalf("Open on a disk without room for the index = %v, want ENOSPC naming the index and its size", err)
	}
}
