package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// sparseFile is 2.5 extents of modelES: data, a hole of one extent and a
// half, then a short tail, so copy-ups meet data, holes and the end of file.
func sparseFile() []byte {
	b := make([]byte, 2*modelES+modelES/2+100)
	for i := range modelES / 2 {
		b[i] = byte(i%251 + 1)
	}
	for i := 2 * modelES; i < len(b); i++ {
		b[i] = byte(i%13 + 1)
	}
	return b
}

// TestCopyUpPaths reads a sparse file through each way the engine copies
// up, and checks the bytes, the copy-up count, and which backing call did
// the work, so that each path is known to have run.
func TestCopyUpPaths(t *testing.T) {
	for name, tc := range copyPaths {
		t.Run(name, func(t *testing.T) {
			r := tc.rig(t)
			want := sparseFile()
			r.writeBacking("d/f", want)
			// A byte written past the backing end of file makes the engine
			// know a size past it, so reads cross the end of the copied data.
			r.write("d/f", 4*modelES+1, []byte{9})
			want = append(want, make([]byte, 4*modelES+2-len(want))...)
			want[4*modelES+1] = 9
			// Reads of every size and alignment: the reader that triggers a
			// copy-up gets its bytes from it.
			for _, rd := range []struct{ off, n int64 }{{10, 100}, {modelES - 7, 20}, {2*modelES + 2000, 2000}} {
				got := make([]byte, rd.n)
				if _, err := r.e.ReadAt(context.Background(), "d/f", got, rd.off); err != nil {
					t.Fatalf("ReadAt(%d, %d): %v", rd.off, rd.n, err)
				}
				if !bytes.Equal(got, want[rd.off:rd.off+rd.n]) {
					i := firstDiff(got, want[rd.off:rd.off+rd.n])
					t.Fatalf("ReadAt(%d, %d) differs at %d", rd.off, rd.n, i)
				}
			}
			if got := r.readAll("d/f"); !bytes.Equal(got, want) {
				t.Fatalf("whole file differs at %d", firstDiff(got, want))
			}
			if s := r.e.Stats(); s.Misses != 4 || s.CopyUpBytes != int64(len(sparseFile())) {
				t.Fatalf("misses %d, copy-up bytes %d; want 4, %d", s.Misses, s.CopyUpBytes, len(sparseFile()))
			}
			if got := r.faulty.Calls(tc.op); got != 4 {
				t.Fatalf("%s calls = %d, want one per extent", tc.op, got)
			}
			if r.e.noKernelCopy.Load() {
				t.Fatal("the kernel refused the copy")
			}
		})
	}
}

func tempDir(t *testing.T) string { return t.TempDir() }

// copyPath is one way the engine copies extents up, and the backing call
// that does the work.
type copyPath struct {
	memory   bool
	cacheDir func(t *testing.T) string
	op       backing.Op
}

var copyPaths = map[string]copyPath{
	"through memory":                     {memory: true, cacheDir: tempDir, op: backing.OpReadAt},
	"in the kernel, one file system":     {cacheDir: tempDir, op: backing.OpCopyRange},
	"in the kernel, across file systems": {cacheDir: shmDir, op: backing.OpCopyRange},
}

// rig opens an engine of 8 slots that copies up this way. Its slots held
// other data before: whatever a copy-up leaves past the backing data must
// read as zeros all the same.
func (p copyPath) rig(t *testing.T) *rig {
	t.Helper()
	r := newRig(t, modelES, 8, func(c *Config) {
		c.Dir = filepath.Join(p.cacheDir(t), "cache")
		if p.memory {
			c.Backing = memoryOnly(c.Backing)
		}
	})
	for slot := range 8 {
		if err := r.e.slab.WriteAt(slot, bytes.Repeat([]byte{0xff}, modelES), 0); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestKernelCopyFaultPublishesNothing fails kernel copies halfway: the
// half-copied extent must not be served or counted, and once the fault
// clears a read copies the backing file as it is then.
func TestKernelCopyFaultPublishesNothing(t *testing.T) {
	r := newRig(t, modelES, 4, nil)
	ctx := context.Background()
	r.writeBacking("f", bytes.Repeat([]byte("old!"), modelES/4))
	r.faulty.SetError(backing.OpCopyRange, errInjected)
	b := make([]byte, modelES)
	if _, err := r.e.ReadAt(ctx, "f", b, 0); !errors.Is(err, errInjected) {
		t.Fatalf("read during the fault: %v", err)
	}
	if s := r.e.Stats(); s.Misses != 0 || s.CopyUpBytes != 0 || s.CachedBytes != 0 {
		t.Fatalf("after the failed copy: misses %d, copy-up bytes %d, cached %d; want none",
			s.Misses, s.CopyUpBytes, s.CachedBytes)
	}
	// The half of the slot the copy wrote holds "old!": a slot published in
	// spite of the fault would serve it instead of the new content.
	newData := bytes.Repeat([]byte("new!"), modelES/4)
	r.writeBacking("f", newData)
	r.faulty.SetError(backing.OpCopyRange, nil)
	if _, err := r.e.ReadAt(ctx, "f", b, 0); err != nil || !bytes.Equal(b, newData) {
		t.Fatalf("read after the fault: %q..., %v", b[:8], err)
	}
}

// TestMissingBackingFileCopiesNothing removes the backing file between the
// stat and the copy: the kernel copy reports it missing, and the extent
// reads as zeros, as a read through memory would make it.
func TestMissingBackingFileCopiesNothing(t *testing.T) {
	r := newRig(t, modelES, 4, nil)
	ctx := context.Background()
	r.writeBacking("f", []byte("soon gone"))
	f, err := r.e.statFile(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.faulty.Remove(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	n, err := r.e.copyInKernel(ctx, f, 0, 0, nil)
	if n != 0 || err != nil {
		t.Fatalf("copyInKernel of a removed file = %d, %v; want 0, nil", n, err)
	}
	if _, err := r.faulty.CopyRange(ctx, "f", 0, 0, 0, 1); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the backing store's copy of a removed file: %v, want not exist", err)
	}
}

// TestCrashAfterKernelCopiesServesWholeExtents copies up two files in turn
// through a cache too small for both, so that kernel copies overwrite slots
// that held the other file, and crashes at every durable step: after
// recovery every extent the index names must hold what the kernel copied.
func TestCrashAfterKernelCopiesServesWholeExtents(t *testing.T) {
	files := map[string][]byte{
		"a": bytes.Repeat([]byte{'a'}, 6*modelES),
		"b": bytes.Repeat([]byte{'b'}, 6*modelES),
	}
	workload := func(r *rig, fsys *vfs.Crashable) {
		for i := 0; i < 6 && !fsys.Crashed(); i++ {
			for _, p := range []string{"a", "b"} {
				r.e.ReadAt(context.Background(), p, make([]byte, 6*modelES), 0)
			}
		}
	}
	rig := func(t *testing.T, fsys *vfs.Crashable) *rig {
		r := crashRig(t, fsys)
		for p, data := range files {
			r.writeBacking(p, data)
		}
		return r
	}
	dry := vfs.NewCrashable(vfs.OS{}, 1)
	r := rig(t, dry)
	atOpen := dry.Steps()
	workload(r, dry)
	steps := dry.Steps() - atOpen
	if steps < 5 || r.e.noKernelCopy.Load() {
		t.Fatalf("workload made %d durable steps (kernel copy refused: %v)", steps, r.e.noKernelCopy.Load())
	}
	for k := 1; k <= steps; k++ {
		t.Run(fmt.Sprintf("step%d", k), func(t *testing.T) {
			fsys := vfs.NewCrashable(vfs.OS{}, uint64(k))
			r := rig(t, fsys)
			fsys.CrashAtStep(fsys.Steps() + k)
			workload(r, fsys)
			fsys.Crash()
			r.e.Close()
			r.cfg.FS = vfs.OS{}
			r.open()
			for p, want := range files {
				if got := r.readAll(p); !bytes.Equal(got, want) {
					t.Fatalf("%s after the crash differs at %d", p, firstDiff(got, want))
				}
			}
		})
	}
}

// TestPartialWriteCopiesUpFirst writes part of extents that are not cached,
// through each way the engine copies up: the backing bytes around the write
// must survive, the gap between the backing end of file and the write must
// read as zeros, and a copy that fails halfway must leave nothing cached.
func TestPartialWriteCopiesUpFirst(t *testing.T) {
	for name, tc := range copyPaths {
		t.Run(name, func(t *testing.T) {
			r := tc.rig(t)
			short, long := bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 3000)
			r.writeBacking("short", short)
			r.writeBacking("long", long)
			r.write("short", 2000, []byte("past the end"))
			r.write("long", 50, []byte("inside"))
			wantShort := append(append(short, make([]byte, 1900)...), "past the end"...)
			wantLong := append(append(append([]byte{}, long[:50]...), "inside"...), long[56:]...)
			if got := r.readAll("short"); !bytes.Equal(got, wantShort) {
				t.Fatalf("short differs at %d", firstDiff(got, wantShort))
			}
			if got := r.readAll("long"); !bytes.Equal(got, wantLong) {
				t.Fatalf("long differs at %d", firstDiff(got, wantLong))
			}
			if s := r.e.Stats(); s.CopyUpBytes != 3100 || r.faulty.Calls(tc.op) != 2 {
				t.Fatalf("copy-up bytes %d, %s calls %d; want 3100, 2", s.CopyUpBytes, tc.op, r.faulty.Calls(tc.op))
			}

			r.writeBacking("broken", long)
			r.faulty.SetError(tc.op, errInjected)
			if _, err := r.e.WriteAt(context.Background(), "broken", []byte("x"), 10); !errors.Is(err, errInjected) {
				t.Fatalf("write during the fault: %v", err)
			}
			r.faulty.SetError(tc.op, nil)
			if got := r.readAll("broken"); !bytes.Equal(got, long) {
				t.Fatalf("after the failed write, broken differs at %d", firstDiff(got, long))
			}
		})
	}
}
