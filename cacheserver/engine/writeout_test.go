package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// syncGate is a backing store whose fsyncs wait until the test opens it,
// so that a test can hold write-backs between their write and their fsync.
type syncGate struct {
	backing.Store
	open chan struct{}
	once sync.Once
	// err, set before the gate opens, fails the fsyncs.
	err error
}

func newSyncGate(s backing.Store) *syncGate {
	return &syncGate{Store: s, open: make(chan struct{})}
}

// Sync waits for the gate to open.
func (g *syncGate) Sync(ctx context.Context, p string) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.err != nil {
		return g.err
	}
	return g.Store.Sync(ctx, p)
}

// release opens the gate; later calls do nothing.
func (g *syncGate) release() { g.once.Do(func() { close(g.open) }) }

// fail opens the gate on fsyncs that fail with err, as those of a node
// that crashed never end well.
func (g *syncGate) fail(err error) {
	g.once.Do(func() {
		g.err = err
		close(g.open)
	})
}

// newSyncGateRig returns a rig whose background write-back stays idle and
// whose backing fsyncs wait for the gate, which opens at the end of the
// test at the latest.
func newSyncGateRig(t *testing.T) (*rig, *syncGate) {
	var g *syncGate
	r := newRig(t, 4096, 64, func(c *Config) {
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 90, DirtyLow: 80}
		g = newSyncGate(c.Backing)
		c.Backing = g
	})
	// Registered after the rig's Close, so run before it.
	t.Cleanup(g.release)
	return r, g
}

// TestWriteOutDoesNotWaitForTheFsync writes a file out while every fsync
// of the backing store waits: WriteOut must return with the data in the
// backing file, and leave it dirty, since nothing made it durable there
// yet; once the fsync comes, it is clean.
func TestWriteOutDoesNotWaitForTheFsync(t *testing.T) {
	r, g := newSyncGateRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("d"), 10000)
	r.write("d/f", 0, data)
	if err := r.e.WriteOut(ctx, "d/f"); err != nil {
		t.Fatalf("WriteOut while fsyncs wait: %v", err)
	}
	if got := r.backingFile("d/f"); !bytes.Equal(got, data) {
		t.Fatalf("backing file after WriteOut: %d bytes, want the %d written", len(got), len(data))
	}
	if s := r.e.Stats(); s.DirtyBytes != int64(len(data)) {
		t.Fatalf("dirty bytes after WriteOut, before the fsync: %d, want %d", s.DirtyBytes, len(data))
	}
	g.release()
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := r.e.Stats(); s.DirtyBytes != 0 {
		t.Fatalf("dirty bytes after the fsync: %d", s.DirtyBytes)
	}
}

// TestWrittenOutDataSurvivesACrashOfTheNode makes a file durable in the
// cache, writes it out, and crashes the node before the fsync of the
// backing file: the backing file system loses what no fsync covered, the
// cache directory what was not synced. The restarted engine must still
// hold the data dirty, and write it back.
func TestWrittenOutDataSurvivesACrashOfTheNode(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 19)
	var g *syncGate
	r := newRig(t, modelES, 6, func(c *Config) {
		crashable(t, c, fsys)
		c.Tunables = Tunables{DirtyHigh: 100, DirtyLow: 90, WriteWindow: WriteWindow{Multiplier: -1}}
		g = newSyncGate(c.Backing)
		c.Backing = g
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("written out, never fsynced. "), 3*modelES/16)[:3*modelES]
	r.write("f", 0, data)
	if err := r.e.Sync(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if err := r.e.WriteOut(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	r.store.crash(t)
	g.fail(errInjected)
	r.cfg.Backing = g.Store
	r.crash(fsys)
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("f"); !bytes.Equal(got, data) {
		t.Fatalf("after a crash the backing file has %d bytes, %d of them as written, want the %d written", len(got), bytes.Count(got, data[:1]), len(data))
	}
}

// TestWriteOutWritesAgainWhatChangedSince rewrites part of a file that was
// written out and waits for its fsync: a second WriteOut must wait for
// the syncer to let go of the extent, then write the new bytes, since the
// backing file lacks them.
func TestWriteOutWritesAgainWhatChangedSince(t *testing.T) {
	r, g := newSyncGateRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("d"), 10000)
	r.write("f", 0, data)
	if err := r.e.WriteOut(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	r.write("f", 100, []byte("changed"))
	copy(data[100:], "changed")
	done := make(chan error, 1)
	go func() { done <- r.e.WriteOut(ctx, "f") }()
	select {
	case err := <-done:
		t.Fatalf("WriteOut returned (%v) while the changed extent waited for the fsync of its last write-back", err)
	case <-time.After(200 * time.Millisecond):
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("f"); !bytes.Equal(got, data) {
		t.Fatalf("backing file after the second WriteOut: %q..., want %q...", got[96:112], data[96:112])
	}
}

// TestFsyncKeepsExplicitTimes sets an explicit modification time on backing
// files after the cache wrote one out, as a client does before it sets the
// time, and not the other. The fsync that follows the write-out must
// leave the time alone on the backing file system of the test (ext4 on
// the development VM), and the write-back of the other must move it: else
// this test could not tell.
func TestFsyncKeepsExplicitTimes(t *testing.T) {
	r, g := newSyncGateRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("d"), 10000)
	for _, p := range []string{"out", "not-out"} {
		r.write(p, 0, data)
	}
	if err := r.e.WriteOut(ctx, "out"); err != nil {
		t.Fatal(err)
	}
	r.writeBacking("not-out", nil)
	explicit := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	r.setTimes(explicit, "out", "not-out")
	g.release()
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r.checkTimesKept(explicit, map[string]bool{"out": true, "not-out": false}, "the flush")
}

// TestExplicitTimeSurvivesACrashAfterWriteOut writes files out, sets an
// explicit modification time on their backing files, as a client does,
// and crashes the server process before the fsyncs commit the extents
// clean: the backing files keep what was written to them, the index calls
// the extents dirty. After the restart the flush must keep the explicit
// time of the file the backing store holds as the cache does, and still
// write back the one rewritten since its write-out, whose backing file
// lacks the new bytes.
func TestExplicitTimeSurvivesACrashAfterWriteOut(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 23)
	var g *syncGate
	r := newRig(t, modelES, 16, func(c *Config) {
		crashable(t, c, fsys)
		c.Tunables = Tunables{DirtyHigh: 100, DirtyLow: 90, WriteWindow: WriteWindow{Multiplier: -1}}
		g = newSyncGate(c.Backing)
		c.Backing = g
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := map[string][]byte{}
	for _, p := range []string{"kept", "rewritten"} {
		want[p] = bytes.Repeat([]byte(p+" out, then timed. "), 3*modelES/16)[:3*modelES-100]
		r.write(p, 0, want[p])
		if err := r.e.WriteOut(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	explicit := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	r.setTimes(explicit, "kept", "rewritten")
	r.write("rewritten", modelES+10, []byte("changed after the time"))
	copy(want["rewritten"][modelES+10:], "changed after the time")
	for p := range want {
		if err := r.e.Sync(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	g.fail(errInjected)
	r.cfg.Backing = g.Store
	r.crash(fsys)
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p, keeps := range map[string]bool{"kept": true, "rewritten": false} {
		if got := r.backingFile(p); !bytes.Equal(got, want[p]) {
			t.Errorf("backing %s after the restart's flush: %d bytes, %d of them as written, want the %d written", p, len(got), bytes.Count(got, want[p][:1]), len(want[p]))
		}
		r.checkTimesKept(explicit, map[string]bool{p: keeps}, "the restart's flush")
	}
}

// TestRecoveredExtentsWrittenUnlessTheBackingFileHoldsThem writes a file
// out and crashes the server process before the fsync commits it clean.
// The restarted engine finds the extents dirty, and must write back those
// whose bytes the backing file lacks, as when it was cut short, or that it
// cannot read to compare, or that a job wrote again since the restart
// (the write moves the time, as it would have on the backing file), and
// only those: the file ends as written.
func TestRecoveredExtentsWrittenUnlessTheBackingFileHoldsThem(t *testing.T) {
	for name, tc := range map[string]struct {
		readErr    error
		backingLen int64 // cut the backing file to this length, unless -1
		rewrite    bool  // write the same bytes into extent 1 again
		wantWrites int64
	}{
		"backing holds all":   {backingLen: -1, wantWrites: 0},
		"backing cut short":   {backingLen: modelES + 100, wantWrites: 2},
		"backing unreadable":  {readErr: errInjected, backingLen: -1, wantWrites: 3},
		"written again since": {backingLen: -1, rewrite: true, wantWrites: 1},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewCrashable(vfs.OS{}, 29)
			var g *syncGate
			r := newRig(t, modelES, 16, func(c *Config) {
				crashable(t, c, fsys)
				c.Tunables = Tunables{DirtyHigh: 100, DirtyLow: 90, WriteWindow: WriteWindow{Multiplier: -1}}
				g = newSyncGate(c.Backing)
				c.Backing = g
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			data := bytes.Repeat([]byte("recovered dirty. "), 3*modelES/16)[:3*modelES-100]
			r.write("f", 0, data)
			if err := r.e.Sync(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			if err := r.e.WriteOut(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			g.fail(errInjected)
			r.cfg.Backing = g.Store
			r.crash(fsys)
			if tc.backingLen >= 0 {
				if err := os.Truncate(filepath.Join(r.root, "f"), tc.backingLen); err != nil {
					t.Fatal(err)
				}
			}
			if tc.rewrite {
				r.write("f", modelES+10, data[modelES+10:modelES+20])
			}
			r.faulty.SetError(backing.OpReadAt, tc.readErr)
			writes := r.faulty.Calls(backing.OpWriteAt)
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if got := r.faulty.Calls(backing.OpWriteAt) - writes; got != tc.wantWrites {
				t.Errorf("extents written back after the restart: %d, want %d", got, tc.wantWrites)
			}
			if got := r.backingFile("f"); !bytes.Equal(got, data) {
				t.Errorf("backing file after the restart's flush: %d bytes, want the %d written", len(got), len(data))
			}
		})
	}
}

// setTimes sets the access and modification times of the backing files
// of paths to at, as a client does after their write-out.
func (r *rig) setTimes(at time.Time, paths ...string) {
	r.t.Helper()
	for _, p := range paths {
		if err := os.Chtimes(filepath.Join(r.root, p), at, at); err != nil {
			r.t.Fatal(err)
		}
	}
}

// checkTimesKept fails the test unless the backing file of each path of
// keeps has the modification time at exactly when keeps says so, after
// what when names.
func (r *rig) checkTimesKept(at time.Time, keeps map[string]bool, when string) {
	r.t.Helper()
	for p, keep := range keeps {
		fi, err := os.Stat(filepath.Join(r.root, p))
		if err != nil {
			r.t.Fatal(err)
		}
		if got := fi.ModTime(); got.Equal(at) != keep {
			r.t.Errorf("backing %s has mtime %v after %s; the explicit time was %v, kept: want %v", p, got, when, at, keep)
		}
	}
}
