package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// changeBacking writes data over the backing file p in place, as cp over
// an existing file does (the same inode, cut and written again), once the
// file system's clock has moved past p's change time, and returns p's
// identity before and after.
func (r *rig) changeBacking(p string, data []byte) (before, after backing.FileID) {
	r.t.Helper()
	before = r.backingID(p)
	for deadline := time.Now().Add(5 * time.Second); ; {
		// ext4 keeps times to a clock tick: make sure one passed.
		time.Sleep(10 * time.Millisecond)
		if err := os.WriteFile(filepath.Join(r.root, p), data, 0o644); err != nil {
			r.t.Fatal(err)
		}
		after = r.backingID(p)
		if after.Other(before) {
			r.t.Fatalf("writing %s in place made another file: %+v, before %+v", p, after, before)
		}
		if after.Change > before.Change {
			return before, after
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("the change time of %s stays at %d", p, before.Change)
		}
	}
}

// TestFileChangedInPlaceIsSeen changes a cached file on the backing store
// in place, as cp over it does: a read that names the new version (an open
// after the change) reads it, and reads of opens before the change are
// served from the cache, now of the new version.
func TestFileChangedInPlaceIsSeen(t *testing.T) {
	const es = 4096
	oldData := bytes.Repeat([]byte("o"), 2*es)
	for name, newData := range map[string][]byte{
		"longer":  bytes.Repeat([]byte("n"), 3*es+7),
		"shorter": bytes.Repeat([]byte("s"), es/2),
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, es, 8, nil)
			r.writeBacking("f", oldData)
			first := r.backingID("f")
			if got := r.readNaming("f", first, len(oldData)); !bytes.Equal(got, oldData) {
				t.Fatal("the first read did not return the file")
			}
			_, changed := r.changeBacking("f", newData)
			got := make([]byte, len(oldData)+len(newData))
			n, _ := r.e.ReadAt(ReadingFile(context.Background(), changed), "f", got, 0)
			if !bytes.Equal(got[:n], newData) {
				t.Fatalf("read naming the changed file: %d bytes %.10q..., want %d bytes of the new version", n, got[:n], len(newData))
			}
			if st := r.e.Stats(); st.ReplacedFiles != 1 {
				t.Errorf("ReplacedFiles = %d, want 1", st.ReplacedFiles)
			}
			reads := r.backingReads()
			for _, id := range []backing.FileID{first, changed, {}} {
				if got := r.readNaming("f", id, len(newData)); !bytes.Equal(got, newData) {
					t.Fatalf("read naming %+v after the drop: %.10q...", id, got)
				}
			}
			if n := r.backingReads() - reads; n != 0 {
				t.Errorf("%d reads of the backing store after the new version was cached, want none", n)
			}
		})
	}
}

// TestFileChangedInPlaceKeepsWhatWasWrittenThroughTheCache changes in place
// a file that holds data written through the cache: nothing of it may be
// dropped, before or after its write-back, whose own change of the file
// must not be taken for one behind the cache's back either.
func TestFileChangedInPlaceKeepsWhatWasWrittenThroughTheCache(t *testing.T) {
	const es = 4096
	r := newRig(t, es, 8, nil)
	r.writeBacking("f", bytes.Repeat([]byte("o"), 2*es))
	r.readNaming("f", r.backingID("f"), 2*es)
	r.write("f", es, []byte("dirty"))
	_, changed := r.changeBacking("f", bytes.Repeat([]byte("n"), 2*es))

	want := append(bytes.Repeat([]byte("o"), es), []byte("dirty")...)
	want = append(want, bytes.Repeat([]byte("o"), es-5)...)
	if got := r.readNaming("f", changed, 2*es); !bytes.Equal(got, want) {
		t.Fatalf("read naming the changed file with dirty extents: %q", got)
	}
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	written := r.backingID("f")
	reads := r.backingReads()
	if got := r.readNaming("f", written, 2*es); !bytes.Equal(got, want) {
		t.Fatalf("read naming the file after its write-back: %q", got)
	}
	if st := r.e.Stats(); st.ReplacedFiles != 0 || r.backingReads() != reads {
		t.Fatalf("ReplacedFiles %d, %d backing reads: the file written through the cache was dropped", st.ReplacedFiles, r.backingReads()-reads)
	}
}

// TestFileChangedInPlaceWhileStoppedIsSeen changes a cached file in place
// while the engine is stopped: the version its extents are of survives
// the restart, and a read of the new version reads it.
func TestFileChangedInPlaceWhileStoppedIsSeen(t *testing.T) {
	const es = 4096
	r := newRig(t, es, 8, nil)
	r.writeBacking("f", bytes.Repeat([]byte("o"), 2*es))
	r.writeBacking("g", bytes.Repeat([]byte("g"), 2*es))
	r.readNaming("f", r.backingID("f"), 2*es)
	r.readNaming("g", r.backingID("g"), 2*es)
	r.restart()
	newData := bytes.Repeat([]byte("n"), 2*es)
	_, changed := r.changeBacking("f", newData)

	reads := r.backingReads()
	if got := r.readNaming("g", r.backingID("g"), 2*es); !bytes.Equal(got, bytes.Repeat([]byte("g"), 2*es)) {
		t.Fatalf("read of the unchanged file after a restart: %.10q...", got)
	}
	if n := r.backingReads() - reads; n != 0 {
		t.Errorf("the unchanged file was read %d times from the backing store, want it served from the cache", n)
	}
	if got := r.readNaming("f", changed, 2*es); !bytes.Equal(got, newData) {
		t.Fatalf("read of the file changed while the engine was stopped: %.10q..., want the new version", got)
	}
}

// TestFileWrittenElsewhereIsNotTakenForChanged copies extents of a file
// here while writes through another server extend it (ExtendSize), and
// changes the file as that server's write-back of its own extents does:
// the copied extents, which that write-back did not touch, must stay, and
// so must the size, whose end the other server may still hold dirty; a
// drop would forget it, a stat would show the backing file's size and an
// append would land over that end.
func TestFileWrittenElsewhereIsNotTakenForChanged(t *testing.T) {
	const es = 4096
	ctx := context.Background()
	for name, extendFirst := range map[string]bool{"extended, then copied": true, "copied, then extended": false} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, es, 8, nil)
			r.writeBacking("f", bytes.Repeat([]byte("o"), 2*es))
			extend := func() {
				if err := r.e.ExtendSize(ctx, "f", 5*es); err != nil {
					t.Fatal(err)
				}
			}
			if extendFirst {
				extend()
			}
			// One extent: no read-ahead copies the others, which belong to
			// the other server.
			r.readNaming("f", r.backingID("f"), es)
			if !extendFirst {
				extend()
			}
			theirs := append(bytes.Repeat([]byte("o"), 2*es), bytes.Repeat([]byte("w"), es)...)
			_, changed := r.changeBacking("f", theirs)
			got := make([]byte, 5*es)
			n, _ := r.e.ReadAt(ReadingFile(ctx, changed), "f", got, 0)
			if want := slices.Concat(theirs, make([]byte, 2*es)); !bytes.Equal(got[:n], want) {
				t.Fatalf("read after the other server's write-back: %d bytes, want %d: the written-back extent and the hole up to the size written elsewhere", n, len(want))
			}
			if st := r.e.Stats(); st.ReplacedFiles != 0 {
				t.Errorf("ReplacedFiles = %d, want the copied extents kept", st.ReplacedFiles)
			}
			if size, _ := r.e.KnownSize("f", 3*es); size != 5*es {
				t.Fatalf("KnownSize after the other server's write-back = %d, want %d", size, 5*es)
			}
		})
	}
}
