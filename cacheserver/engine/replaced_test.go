package engine

import (
	"bytes"
	"context"
	"maps"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/index"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// backingID returns the identity of the backing file p.
func (r *rig) backingID(p string) backing.FileID {
	r.t.Helper()
	id, err := backing.IDOf(context.Background(), backing.NewDir(r.root), p)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// readNaming reads n bytes of p at 0 through the engine, naming the
// backing file id (none when zero).
func (r *rig) readNaming(p string, id backing.FileID, n int) []byte {
	r.t.Helper()
	b := make([]byte, n)
	if _, err := r.e.ReadAt(ReadingFile(context.Background(), id), p, b, 0); err != nil {
		r.t.Fatalf("ReadAt(%s) naming %+v: %v", p, id, err)
	}
	return b
}

// TestReadNamingAReplacementDropsTheOldExtents checks that a read that
// names the backing file that replaced the one the cached extents came
// from reads the new file, while reads that name the old one, or none,
// are served from the cache as before.
func TestReadNamingAReplacementDropsTheOldExtents(t *testing.T) {
	const es = 4096
	oldData := bytes.Repeat([]byte("o"), 2*es)
	newData := bytes.Repeat([]byte("n"), 2*es+100)
	tests := map[string]struct {
		name     func(oldID, newID backing.FileID) backing.FileID
		want     []byte
		wantDrop int64
	}{
		"the new file":  {func(_, n backing.FileID) backing.FileID { return n }, newData, 1},
		"the old file":  {func(o, _ backing.FileID) backing.FileID { return o }, oldData, 0},
		"no file":       {func(_, _ backing.FileID) backing.FileID { return backing.FileID{} }, oldData, 0},
		"the new inode": {func(_, n backing.FileID) backing.FileID { return backing.FileID{Ino: n.Ino} }, newData, 1},
		"the old inode": {func(o, _ backing.FileID) backing.FileID { return backing.FileID{Ino: o.Ino} }, oldData, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, es, 8, nil)
			r.writeBacking("f", oldData)
			oldID := r.backingID("f")
			if got := r.readNaming("f", oldID, len(oldData)); !bytes.Equal(got, oldData) {
				t.Fatal("the first read did not return the old file")
			}
			r.replaceBacking("f", newData)
			newID := r.backingID("f")
			if !newID.Other(oldID) {
				t.Fatalf("the replacement has the old file's identity %+v", oldID)
			}
			reads := r.backingReads()
			named := tc.name(oldID, newID)
			want := tc.want[:min(len(tc.want), len(oldData))]
			if tc.wantDrop > 0 {
				want = tc.want
			}
			for range 2 {
				if got := r.readNaming("f", named, len(want)); !bytes.Equal(got, want) {
					t.Fatalf("read naming %+v: %.10q..., want %.10q...", named, got, want)
				}
			}
			st := r.e.Stats()
			if st.ReplacedFiles != tc.wantDrop {
				t.Errorf("ReplacedFiles = %d, want %d", st.ReplacedFiles, tc.wantDrop)
			}
			if copied := r.backingReads() - reads; (copied > 0) != (tc.wantDrop > 0) {
				t.Errorf("%d reads of the backing store, want them only after a drop", copied)
			}
		})
	}
}

// TestReplacedFileWithDirtyExtentsKeepsThem checks that a file whose
// backing file was replaced while it holds dirty extents drops nothing:
// the dirty bytes stay, written back to the file the path names, and the
// clean extents stay with them until none is dirty.
func TestReplacedFileWithDirtyExtentsKeepsThem(t *testing.T) {
	const es = 4096
	r := newRig(t, es, 8, nil)
	r.writeBacking("f", bytes.Repeat([]byte("o"), 2*es))
	oldID := r.backingID("f")
	r.readNaming("f", oldID, 2*es)
	r.write("f", es, []byte("dirty"))
	r.replaceBacking("f", bytes.Repeat([]byte("n"), 2*es))
	newID := r.backingID("f")

	want := append(bytes.Repeat([]byte("o"), es), []byte("dirty")...)
	want = append(want, bytes.Repeat([]byte("o"), es-5)...)
	if got := r.readNaming("f", newID, 2*es); !bytes.Equal(got, want) {
		t.Fatalf("read naming the new file with dirty extents: %q", got)
	}
	if st := r.e.Stats(); st.ReplacedFiles != 0 || st.DirtyBytes != 5 {
		t.Fatalf("ReplacedFiles %d, DirtyBytes %d; want nothing dropped", st.ReplacedFiles, st.DirtyBytes)
	}

	// Written back, the dirty bytes are in the new file, and the next read
	// of it drops the old clean extent.
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want = append(bytes.Repeat([]byte("n"), es), []byte("dirty")...)
	want = append(want, bytes.Repeat([]byte("n"), es-5)...)
	if got := r.readNaming("f", newID, 2*es); !bytes.Equal(got, want) {
		t.Fatalf("read naming the new file once written back: %q", got)
	}
	if st := r.e.Stats(); st.ReplacedFiles != 1 {
		t.Fatalf("ReplacedFiles = %d after the write-back, want 1", st.ReplacedFiles)
	}
}

// TestFileWrittenThroughTheCacheIsNotReplaced checks that a file written
// through the cache is not taken for a replacement of itself: its extents,
// whose source the engine does not know, serve a read that names it.
func TestFileWrittenThroughTheCacheIsNotReplaced(t *testing.T) {
	const es = 4096
	r := newRig(t, es, 8, nil)
	data := bytes.Repeat([]byte("w"), es+10)
	r.write("f", 0, data)
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	reads := r.backingReads()
	id := r.backingID("f")
	for range 2 {
		if got := r.readNaming("f", id, len(data)); !bytes.Equal(got, data) {
			t.Fatalf("read naming the written file: %.10q...", got)
		}
	}
	if st := r.e.Stats(); st.ReplacedFiles != 0 || r.backingReads() != reads {
		t.Fatalf("ReplacedFiles %d, %d backing reads: the written file was dropped",
			st.ReplacedFiles, r.backingReads()-reads)
	}
}

// TestWriteNamingAReplacementKeepsTheOldBytesOut writes part of an extent
// of a file replaced behind the cache, through an open of the new file:
// the write must land in the new file's bytes, not in those of the old
// file's cached extent, which reads of the new file would see around it
// until the write-back.
func TestWriteNamingAReplacementKeepsTheOldBytesOut(t *testing.T) {
	const es = 4096
	r := newRig(t, es, 8, nil)
	r.writeBacking("f", bytes.Repeat([]byte("o"), es))
	r.readNaming("f", r.backingID("f"), es)
	r.replaceBacking("f", bytes.Repeat([]byte("n"), es))
	ctx := ReadingFile(context.Background(), r.backingID("f"))
	if _, err := r.e.WriteAt(ctx, "f", []byte("written"), 10); err != nil {
		t.Fatal(err)
	}
	want := append(append(bytes.Repeat([]byte("n"), 10), []byte("written")...), bytes.Repeat([]byte("n"), es-17)...)
	if got := r.readNaming("f", r.backingID("f"), es); !bytes.Equal(got, want) {
		t.Fatalf("read of the new file after the write: %.40q", got)
	}
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("f"); !bytes.Equal(got, want) {
		t.Fatalf("backing file after the write-back: %.40q, want the new file's bytes around the write", got)
	}
}

// TestWriteWhenTheCheckFails writes through an open of the file that
// replaced the cached one while the backing store cannot be asked which
// file the path names: the write goes in, as it did before writes named
// their file, since pages a client's kernel wrote back cannot be retried.
func TestWriteWhenTheCheckFails(t *testing.T) {
	const es = 4096
	r := newRig(t, es, 8, nil)
	r.writeBacking("f", bytes.Repeat([]byte("o"), es))
	r.readNaming("f", r.backingID("f"), es)
	r.replaceBacking("f", bytes.Repeat([]byte("n"), es))
	ctx := Accepted(ReadingFile(context.Background(), r.backingID("f")))
	r.faulty.SetError(backing.OpStat, syscall.EIO)
	if _, err := r.e.WriteAt(ctx, "f", []byte("pages"), 0); err != nil {
		t.Fatalf("write of written-back pages while the check fails: %v", err)
	}
}

// TestFileReplacedWhileStoppedIsSeen replaces the backing file of cached
// extents while the engine is stopped, cleanly or by a crash at each of
// its durable steps: a read that names the new file after the restart
// must read it, not the extents of the old one, and a read that names a
// file the restart found unchanged must be served from the cache.
func TestFileReplacedWhileStoppedIsSeen(t *testing.T) {
	const es = 4096
	gen := func(c byte) []byte { return bytes.Repeat([]byte{c}, 2*es+100) }
	t.Run("restart", func(t *testing.T) {
		r := newRig(t, es, 8, nil)
		r.writeBacking("f", gen('o'))
		r.writeBacking("g", gen('g'))
		r.readNaming("f", r.backingID("f"), len(gen('o')))
		r.readNaming("g", r.backingID("g"), len(gen('g')))
		r.restart()
		r.replaceBacking("f", gen('n'))

		reads := r.backingReads()
		if got := r.readNaming("g", r.backingID("g"), len(gen('g'))); !bytes.Equal(got, gen('g')) {
			t.Fatalf("read of the unchanged file after a restart: %.10q...", got)
		}
		if n := r.backingReads() - reads; n != 0 {
			t.Errorf("the unchanged file was read %d times from the backing store, want it served from the cache", n)
		}
		if got := r.readNaming("f", r.backingID("f"), len(gen('n'))); !bytes.Equal(got, gen('n')) {
			t.Fatalf("read of the file replaced while the engine was stopped: %.10q..., want the new file", got)
		}
		if st := r.e.Stats(); st.ReplacedFiles != 1 {
			t.Errorf("ReplacedFiles = %d, want 1", st.ReplacedFiles)
		}
	})
	t.Run("written through the cache", func(t *testing.T) {
		// Its extents have no source until a call names one, which the
		// engine learns from the backing store and commits on its own.
		r := newRig(t, es, 8, nil)
		r.write("f", 0, gen('w'))
		if err := r.e.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.readNaming("f", r.backingID("f"), len(gen('w')))
		r.restart()
		r.replaceBacking("f", gen('n'))
		if got := r.readNaming("f", r.backingID("f"), len(gen('n'))); !bytes.Equal(got, gen('n')) {
			t.Fatalf("read of the file replaced while the engine was stopped: %.10q..., want the new file", got)
		}
	})
	t.Run("crash", func(t *testing.T) {
		ctx := context.Background()
		for step := 1; ; step++ {
			fsys := vfs.NewCrashable(vfs.OS{}, uint64(step))
			r := newRig(t, es, 8, func(c *Config) { crashable(t, c, fsys) })
			fsys.CrashAtStep(step)
			// Cache the first file, then the one that replaces it while the
			// engine runs; a crash at any step ends the calls with errors.
			r.writeBacking("f", gen('1'))
			first := ReadingFile(ctx, r.backingID("f"))
			r.e.ReadAt(first, "f", make([]byte, 2*es+100), 0)
			r.e.waitCommit(ctx)
			r.replaceBacking("f", gen('2'))
			second := ReadingFile(ctx, r.backingID("f"))
			r.e.ReadAt(second, "f", make([]byte, 2*es+100), 0)
			r.e.waitCommit(ctx)
			crashed := fsys.Crashed()
			r.crash(fsys)

			// The restarted engine serves whichever file the path names.
			if got := r.readNaming("f", r.backingID("f"), len(gen('2'))); !bytes.Equal(got, gen('2')) {
				t.Fatalf("crash at step %d: read of the current file: %.10q..., want the second file", step, got)
			}
			r.replaceBacking("f", gen('3'))
			if got := r.readNaming("f", r.backingID("f"), len(gen('3'))); !bytes.Equal(got, gen('3')) {
				t.Fatalf("crash at step %d, file replaced after the restart: %.10q..., want the third file", step, got)
			}
			r.e.Close()
			r.e = nil
			if !crashed {
				break
			}
		}
	})
}

// TestSourceRecordsGoWithTheExtents checks that the index keeps the
// source of a file only while the cache holds extents of it: records of
// files evicted, invalidated, unlinked or dropped are deleted, so the
// index does not grow with every file a job ever read.
func TestSourceRecordsGoWithTheExtents(t *testing.T) {
	const es = 4096
	ctx := context.Background()
	r := newRig(t, es, 16, nil)
	gone := map[string]func() error{
		"evicted":     func() error { return r.e.EvictPath(ctx, "evicted") },
		"invalidated": func() error { return r.e.InvalidatePath(ctx, "invalidated") },
		"unlinked":    func() error { return r.e.Unlink(ctx, "unlinked") },
		"dropped":     func() error { return r.e.Drop(ctx, "dropped") },
	}
	for p := range gone {
		r.writeBacking(p, []byte(p))
		r.readNaming(p, r.backingID(p), len(p))
	}
	r.writeBacking("kept", []byte("kept"))
	kept := r.backingID("kept")
	r.readNaming("kept", kept, 4)
	if err := r.e.waitCommit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.sourceRecords(); len(got) != len(gone)+1 {
		t.Fatalf("source records after the reads: %v, want one per file", got)
	}
	for p, remove := range gone {
		if err := remove(); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if err := r.e.waitCommit(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]backing.FileID{"kept": kept}
	if got := r.sourceRecords(); !maps.Equal(got, want) {
		t.Fatalf("source records after the files went: %v, want %v", got, want)
	}
}

// sourceRecords returns the source records the index holds.
func (r *rig) sourceRecords() map[string]backing.FileID {
	r.t.Helper()
	got := map[string]backing.FileID{}
	err := r.e.idx.LoadSources(func(p string, s index.Source) error {
		got[p] = backing.FileID{Ino: s.Ino, Birth: s.Birth, Gen: s.Gen, Change: s.Change}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}
