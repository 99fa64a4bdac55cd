package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// acked tracks, per file, the content a Sync acknowledged and every byte
// written since: after a crash each byte must be one of those.
type acked struct {
	writes []string // every write, for failure messages
	ack    map[string][]byte
	cur    map[string][]byte
	later  map[string]map[int64][]byte // path -> offset -> values written since ack
}

func newAcked() *acked {
	return &acked{ack: map[string][]byte{}, cur: map[string][]byte{}, later: map[string]map[int64][]byte{}}
}

func (a *acked) write(p string, off int64, data []byte) {
	a.writes = append(a.writes, fmt.Sprintf("%s [%d,%d) = %d", p, off, off+int64(len(data)), data[0]))
	cur := a.cur[p]
	if end := off + int64(len(data)); int64(len(cur)) < end {
		cur = append(cur, make([]byte, end-int64(len(cur)))...)
	}
	copy(cur[off:], data)
	a.cur[p] = cur
	if a.later[p] == nil {
		a.later[p] = map[int64][]byte{}
	}
	for i, b := range data {
		a.later[p][off+int64(i)] = append(a.later[p][off+int64(i)], b)
	}
}

// sync acknowledges the current content of every file: with Durability
// Cache one Sync commits the whole index.
func (a *acked) sync() {
	for p, c := range a.cur {
		a.ack[p] = append([]byte(nil), c...)
	}
	clear(a.later)
}

// check reports the first byte of got that no acknowledged or later write
// explains.
func (a *acked) check(p string, got []byte) error {
	ack := a.ack[p]
	if len(got) < len(ack) || len(got) > len(a.cur[p]) {
		return fmt.Errorf("%s: size %d, acknowledged %d, written %d", p, len(got), len(ack), len(a.cur[p]))
	}
	for i, b := range got {
		var want byte
		if i < len(ack) {
			want = ack[i]
		}
		if b == want {
			continue
		}
		ok := false
		for _, v := range a.later[p][int64(i)] {
			ok = ok || v == b
		}
		if !ok {
			return fmt.Errorf("%s: byte %d = %d, acknowledged %d, never written since; writes:\n%s",
				p, i, b, want, strings.Join(a.writes, "\n"))
		}
	}
	return nil
}

// crashWorkload writes and syncs deterministically until the file system
// crashes or the work is done.
func crashWorkload(r *rig, fsys *vfs.Crashable, a *acked, seed uint64) {
	// After the crash the engine's device fails every call; a writer waiting
	// for space that only write-back from the dead device could free would
	// wait forever, as it should, so the workload stops waiting at the crash.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for !fsys.Crashed() && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	rng := rand.New(rand.NewPCG(seed, 1))
	paths := []string{"x", "y", "z/w"}
	for i := 0; i < 120 && !fsys.Crashed(); i++ {
		p := paths[rng.IntN(len(paths))]
		switch k := rng.IntN(10); {
		case k < 6:
			off := rng.Int64N(5 * modelES)
			data := make([]byte, 1+rng.IntN(2*modelES))
			for j := range data {
				data[j] = byte(i%250 + 1)
			}
			// A write that fails at the crash may have been applied in
			// part, so it counts as written either way.
			a.write(p, off, data)
			r.e.WriteAt(ctx, p, data, off)
		case k < 8:
			if r.e.Sync(ctx, p) == nil && !fsys.Crashed() {
				a.sync()
			}
		case k < 9:
			r.e.EvictPath(ctx, p)
		default:
			r.e.Flush(ctx)
		}
	}
}

func crashRig(t *testing.T, fsys vfs.FS) *rig {
	return newRigOver(t, shmDir(t), modelES, 6, func(c *Config) {
		c.Dir = filepath.Join(shmDir(t), "cache")
		c.FS = fsys
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 50, DirtyLow: 20, EvictHigh: 60, EvictLow: 40,
			WriteWindow: WriteWindow{Multiplier: -1}}
	})
}

// TestCrashAtEveryDurableStep crashes the cache directory's file system at
// each durable step of a workload (slab fdatasync, index commit), losing a
// random subset of unsynced slab writes, then reopens the engine and checks
// that every acknowledged byte is there and nothing else is served.
func TestCrashAtEveryDurableStep(t *testing.T) {
	seeds := uint64(3)
	if raceEnabled {
		seeds = 1
	}
	for seed := range seeds {
		dry := vfs.NewCrashable(vfs.OS{}, seed)
		r := crashRig(t, dry)
		atOpen := dry.Steps()
		crashWorkload(r, dry, newAcked(), seed)
		steps := dry.Steps() - atOpen
		if steps < 20 {
			t.Fatalf("workload made only %d durable steps", steps)
		}
		for k := 1; k <= steps; k++ {
			t.Run(fmt.Sprintf("seed%d/step%d", seed, k), func(t *testing.T) {
				fsys := vfs.NewCrashable(vfs.OS{}, seed*1000+uint64(k))
				r := crashRig(t, fsys)
				fsys.CrashAtStep(fsys.Steps() + k)
				a := newAcked()
				crashWorkload(r, fsys, a, seed)
				r.crash(fsys)
				for p := range a.cur {
					if _, err := r.e.Size(context.Background(), p); errors.Is(err, fs.ErrNotExist) && a.ack[p] == nil {
						continue // never acknowledged, lost in the crash
					}
					if err := a.check(p, r.readAll(p)); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// TestUnsyncedWritesSurviveACrashAfterTheCommitInterval writes without
// fsync, waits past the commit interval, and crashes: the periodic group
// commit must have made the writes durable, so that a server crash loses at
// most one interval of writes that no fsync covered.
func TestUnsyncedWritesSurviveACrashAfterTheCommitInterval(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 7)
	r := newRig(t, modelES, 6, func(c *Config) {
		c.Dir = filepath.Join(shmDir(t), "cache")
		c.FS = fsys
		c.CommitInterval = 20 * time.Millisecond
		c.Tunables = Tunables{DirtyHigh: 100, DirtyLow: 90, WriteWindow: WriteWindow{Multiplier: -1}}
	})
	want := []byte("written, never fsynced")
	r.write("f", 3, want)
	deadline := time.Now().Add(5 * time.Second)
	for !r.e.committed() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r.crash(fsys)
	if got := r.readAll("f"); string(got[3:]) != string(want) {
		t.Fatalf("after a crash past the commit interval: %q, want %q", got[3:], want)
	}
	if got := r.backingFile("f"); got != nil {
		t.Fatalf("backing file = %q: the write must have stayed in the cache, dirty", got)
	}
}

// dirtyCrashRig returns a rig for crash tests, on a crashable file system
// drawn from seed, whose dirty data stays dirty: write-back starts only
// when the whole cache is dirty.
func dirtyCrashRig(t *testing.T, seed uint64) (*rig, *vfs.Crashable) {
	fsys := vfs.NewCrashable(vfs.OS{}, seed)
	r := newRig(t, modelES, 6, func(c *Config) {
		crashable(t, c, fsys)
		c.Tunables = Tunables{DirtyHigh: 100, DirtyLow: 90, WriteWindow: WriteWindow{Multiplier: -1}}
	})
	return r, fsys
}

// TestRemovedFilesStayGoneAfterACrash removes a file with dirty data, by
// unlink, by drop and by rename, and crashes right after the call
// returned, long before a periodic commit: the restarted engine must not
// find the file's extents again, or write-back would bring the file back
// on the backing store.
func TestRemovedFilesStayGoneAfterACrash(t *testing.T) {
	for name, remove := range map[string]func(e *Engine) error{
		"unlink": func(e *Engine) error { return e.Unlink(context.Background(), "f") },
		"drop":   func(e *Engine) error { return e.Drop(context.Background(), "f") },
		"rename": func(e *Engine) error { return e.Rename(context.Background(), "f", "g") },
	} {
		t.Run(name, func(t *testing.T) {
			r, fsys := dirtyCrashRig(t, 11)
			ctx := context.Background()
			r.write("f", 0, []byte("dirty, and synced"))
			if err := r.e.Sync(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			if err := remove(r.e); err != nil {
				t.Fatal(err)
			}
			r.crash(fsys)
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := r.backingFile("f"); got != nil {
				t.Fatalf("the backing store has f again after a crash: %q", got)
			}
			if n, err := r.e.ReadAt(ctx, "f", make([]byte, 8), 0); n != 0 || err == nil {
				t.Fatalf("read of the removed f after a crash: %d bytes, %v", n, err)
			}
		})
	}
}

// TestFlushedDataStaysCleanAfterACrash flushes a file, changes its
// backing file as a job outside the cache may once the flush returned, and
// crashes long before a periodic commit: the restarted engine must not
// find the file dirty again and write the flushed bytes back over the
// change.
func TestFlushedDataStaysCleanAfterACrash(t *testing.T) {
	for name, flush := range map[string]func(e *Engine) error{
		"flush of the path": func(e *Engine) error { return e.FlushPath(context.Background(), "f") },
		"flush of the tree": func(e *Engine) error { return e.FlushPath(context.Background(), "") },
		"flush of all":      func(e *Engine) error { return e.Flush(context.Background()) },
	} {
		t.Run(name, func(t *testing.T) {
			r, fsys := dirtyCrashRig(t, 19)
			ctx := context.Background()
			r.write("f", 0, []byte("written through the cache"))
			if err := r.e.Sync(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			if err := flush(r.e); err != nil {
				t.Fatal(err)
			}
			changed := []byte("changed on the backing store after the flush, and longer")
			r.writeBacking("f", changed)
			r.crash(fsys)
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := r.backingFile("f"); !bytes.Equal(got, changed) {
				t.Fatalf("backing file after a crash = %q, want %q", got, changed)
			}
		})
	}
}

// TestTruncatedExtentsStayDroppedAfterACrash truncates, and trims, a file
// whose dirty extents a sync made durable, then crashes long before a
// periodic commit. A client trims every server before it cuts the backing
// file, but syncs at close only the servers it wrote to: the restarted
// engine must not find the extents past the new size again, or write-back
// would grow the cut file back with the data cut from it.
func TestTruncatedExtentsStayDroppedAfterACrash(t *testing.T) {
	for name, cut := range map[string]func(e *Engine, size int64) error{
		"truncate": func(e *Engine, size int64) error { return e.Truncate(context.Background(), "f", size) },
		"trim":     func(e *Engine, size int64) error { return e.Trim(context.Background(), "f", size) },
	} {
		t.Run(name, func(t *testing.T) {
			r, fsys := dirtyCrashRig(t, 17)
			ctx := context.Background()
			data := bytes.Repeat([]byte("synced, then cut. "), 3*modelES/16)[:3*modelES]
			r.write("f", 0, data)
			if err := r.e.Sync(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			size := int64(modelES + 100)
			if err := cut(r.e, size); err != nil {
				t.Fatal(err)
			}
			r.crash(fsys)
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := r.backingFile("f"); !bytes.Equal(got, data[:size]) {
				t.Fatalf("after a crash the backing file has %d bytes, want the %d the cut left", len(got), size)
			}
		})
	}
}

// TestDroppedExtentsStayDroppedAfterACrash invalidates, and evicts, a file
// whose clean extents the index holds, then changes the backing file behind
// the cache's back and crashes long before a periodic commit. The restarted
// engine must read the backing file's new bytes: extents found again in the
// index would serve the bytes the job asked to forget.
func TestDroppedExtentsStayDroppedAfterACrash(t *testing.T) {
	for name, forget := range map[string]func(e *Engine) error{
		"invalidate": func(e *Engine) error { return e.InvalidatePath(context.Background(), "f") },
		"evict":      func(e *Engine) error { return e.EvictPath(context.Background(), "f") },
	} {
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewCrashable(vfs.OS{}, 13)
			r := newRig(t, modelES, 6, func(c *Config) {
				crashable(t, c, fsys)
			})
			ctx := context.Background()
			r.writeBacking("f", []byte("old bytes"))
			if got := r.readAll("f"); string(got) != "old bytes" {
				t.Fatalf("read %q, want the backing file's bytes", got)
			}
			if err := r.e.Sync(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			if err := forget(r.e); err != nil {
				t.Fatal(err)
			}
			r.writeBacking("f", []byte("new bytes"))
			r.crash(fsys)
			if got := r.readAll("f"); string(got) != "new bytes" {
				t.Fatalf("after a crash the cache serves %q, want %q", got, "new bytes")
			}
		})
	}
}
