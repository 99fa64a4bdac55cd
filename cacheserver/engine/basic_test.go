package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriteReadFlushRestart(t *testing.T) {
	r := newRig(t, 4096, 16, nil)
	ctx := context.Background()
	data := bytes.Repeat([]byte("abcdefg"), 3000) // 21000 bytes: 6 extents
	r.write("d/f", 100, data)
	want := append(make([]byte, 100), data...)
	if got := r.readAll("d/f"); !bytes.Equal(got, want) {
		t.Fatalf("read before flush differs")
	}
	if got := r.backingFile("d/f"); len(got) != 0 {
		t.Fatalf("backing file has %d bytes before any write-back", len(got))
	}
	if err := r.e.Sync(ctx, "d/f"); err != nil {
		t.Fatal(err)
	}
	r.restart()
	if got := r.readAll("d/f"); !bytes.Equal(got, want) {
		t.Fatalf("read after restart differs")
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("d/f"); !bytes.Equal(got, want) {
		t.Fatalf("backing after flush differs: %d bytes, want %d", len(got), len(want))
	}
	if s := r.e.Stats(); s.DirtyBytes != 0 || s.WriteBackBytes < int64(len(data)) {
		t.Fatalf("stats after flush: %+v", s)
	}
}

func TestReadPastEndAndMissing(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(r.root, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path    string
		off     int64
		size    int
		want    string
		wantErr error
	}{
		"whole file, short read": {"f", 0, 10, "hello", io.EOF},
		"at end":                 {"f", 5, 10, "", io.EOF},
		"past end":               {"f", 50, 10, "", io.EOF},
		"middle":                 {"f", 1, 3, "ell", nil},
		"missing file":           {"nope", 0, 3, "", fs.ErrNotExist},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := make([]byte, tc.size)
			n, err := r.e.ReadAt(ctx, tc.path, b, tc.off)
			if diff := cmp.Diff(tc.want, string(b[:n])); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestSyncWithBackingDurabilityReachesTheBackingStore(t *testing.T) {
	r := newRig(t, 4096, 16, func(c *Config) { c.Durability = Backing })
	data := bytes.Repeat([]byte("xyz"), 5000)
	r.write("dir/f", 10, data)
	if err := r.e.Sync(context.Background(), "dir/f"); err != nil {
		t.Fatal(err)
	}
	if got := r.backingFile("dir/f"); !bytes.Equal(got, append(make([]byte, 10), data...)) {
		t.Fatalf("backing has %d bytes after Sync, want %d", len(got), 10+len(data))
	}
	if s := r.e.Stats(); s.DirtyBytes != 0 {
		t.Fatalf("dirty bytes after Sync: %d", s.DirtyBytes)
	}
}

func TestPreloadCopiesUpWholeTrees(t *testing.T) {
	r := newRig(t, 4096, 16, nil)
	r.writeBacking("t/a", bytes.Repeat([]byte{1}, 9000))
	r.writeBacking("t/sub/b", bytes.Repeat([]byte{2}, 100))
	r.writeBacking("other", bytes.Repeat([]byte{3}, 100))
	if err := r.e.Preload(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if s := r.e.Stats(); s.Misses != 4 || s.CopyUpBytes != 9100 {
		t.Fatalf("after preload: misses %d, copy-up bytes %d; want 4, 9100", s.Misses, s.CopyUpBytes)
	}
	calls := r.backingReads()
	r.readAll("t/a")
	r.readAll("t/sub/b")
	if got := r.backingReads(); got != calls {
		t.Fatalf("reads after preload went to the backing store %d times", got-calls)
	}
}

func TestRenameDirectoryFlushesItsFiles(t *testing.T) {
	r := newRig(t, 4096, 16, nil)
	ctx := context.Background()
	r.write("src/a", 0, []byte("alpha"))
	r.write("src/deep/b", 5000, []byte("beta"))
	if err := r.e.Rename(ctx, "src", "dst"); err != nil {
		t.Fatal(err)
	}
	if got := string(r.readAll("dst/a")); got != "alpha" {
		t.Fatalf("dst/a = %q", got)
	}
	if got := r.readAll("dst/deep/b"); !bytes.Equal(got[5000:], []byte("beta")) || len(got) != 5004 {
		t.Fatalf("dst/deep/b has %d bytes", len(got))
	}
	if _, err := r.e.Size(ctx, "src/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("src/a after rename: %v", err)
	}
	if s := r.e.Stats(); s.DirtyBytes != 0 {
		t.Fatalf("dirty bytes left: %d", s.DirtyBytes)
	}
}

func TestExtendSizeSurvivesRestart(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	if err := r.e.ExtendSize(ctx, "striped", 3<<20); err != nil {
		t.Fatal(err)
	}
	r.restart()
	if size, err := r.e.Size(ctx, "striped"); err != nil || size != 3<<20 {
		t.Fatalf("size after restart = %d, %v", size, err)
	}
	b := make([]byte, 10)
	if n, err := r.e.ReadAt(ctx, "striped", b, 3<<20-5); n != 5 || !errors.Is(err, io.EOF) || !bytes.Equal(b[:5], make([]byte, 5)) {
		t.Fatalf("read at the end: %d, %v, %v", n, err, b[:n])
	}
	if got := r.backingFile("striped"); got != nil {
		t.Fatalf("a read created %d bytes on the backing store", len(got))
	}
}

func TestFileCreatedBehindTheCacheIsSeen(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	b := make([]byte, 4)
	if _, err := r.e.ReadAt(context.Background(), "late", b, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read before creation: %v", err)
	}
	r.writeBacking("late", []byte("here"))
	if n, err := r.e.ReadAt(context.Background(), "late", b, 0); n != 4 || string(b) != "here" {
		t.Fatalf("read after creation: %q, %v", b[:n], err)
	}
}

// TestSizeKeepsNoRecord asks for the sizes of many files the cache holds
// nothing of, as a metadata server does for every stat: the answers come
// from the backing store, and the engine keeps no state for them.
func TestSizeKeepsNoRecord(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	r.write("cached", 0, []byte("held"))
	before := r.trackedFiles()
	for i := range 200 {
		p := fmt.Sprintf("d/f%d", i)
		r.writeBacking(p, make([]byte, i))
		if size, err := r.e.Size(ctx, p); err != nil || size != int64(i) {
			t.Fatalf("Size(%s) = %d, %v; want %d", p, size, err, i)
		}
		if _, err := r.e.Size(ctx, fmt.Sprintf("missing/f%d", i)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Size of a missing file: %v", err)
		}
	}
	if after := r.trackedFiles(); after != before {
		t.Fatalf("the engine tracks %d files after 400 Size calls, %d before", after, before)
	}
	if err := r.e.ExtendSize(ctx, "cached", 9000); err != nil {
		t.Fatal(err)
	}
	if size, err := r.e.Size(ctx, "cached"); err != nil || size != 9000 {
		t.Fatalf("Size of a file the cache holds = %d, %v; want 9000", size, err)
	}
}

// TestKnownSize checks the size the engine knows without the backing store:
// written data, ExtendSize and truncation count, the backing file does not.
func TestKnownSize(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	r.writeBacking("backed", make([]byte, 10000))
	if size, ok := r.e.KnownSize("backed", 0); ok {
		t.Fatalf("KnownSize of a file the cache holds nothing of = %d, true", size)
	}
	r.write("w", 5000, []byte("x"))
	if size, ok := r.e.KnownSize("w", 0); !ok || size != 5001 {
		t.Fatalf("KnownSize after a write = %d, %v; want 5001", size, ok)
	}
	if err := r.e.ExtendSize(ctx, "w", 9000); err != nil {
		t.Fatal(err)
	}
	if size, _ := r.e.KnownSize("w", 0); size != 9000 {
		t.Fatalf("KnownSize after ExtendSize = %d, want 9000", size)
	}
	if err := r.e.Truncate(ctx, "w", 100); err != nil {
		t.Fatal(err)
	}
	if size, _ := r.e.KnownSize("w", 0); size != 100 {
		t.Fatalf("KnownSize after Truncate = %d, want 100", size)
	}
}

// TestReadOfMissingFileKeepsNoRecord reads many files that exist nowhere, as
// jobs probing for optional inputs do: each read fails with fs.ErrNotExist,
// and the engine keeps no state for them.
func TestReadOfMissingFileKeepsNoRecord(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	r.write("cached", 0, []byte("held"))
	before := r.trackedFiles()
	b := make([]byte, 16)
	for i := range 200 {
		if _, err := r.e.ReadAt(ctx, fmt.Sprintf("missing/f%d", i), b, 0); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("read of a missing file: %v", err)
		}
	}
	if after := r.trackedFiles(); after != before {
		t.Fatalf("the engine tracks %d files after 200 reads of missing files, %d before", after, before)
	}
	r.writeBacking("missing/f7", []byte("late"))
	if n, err := r.e.ReadAt(ctx, "missing/f7", b, 0); string(b[:n]) != "late" || !errors.Is(err, io.EOF) {
		t.Fatalf("read of a file created later = %q, %v", b[:n], err)
	}
}

// TestKnownSizeTheBackingFileCaughtUpWithIsForgotten checks that a size
// the cache knows is forgotten once the backing file is seen as long and
// the cache holds no dirty data of the file, so that a shorter file that
// replaces it behind the cache shows its own size; and that sizes of
// data not written back stay, whatever the backing file's size.
func TestKnownSizeTheBackingFileCaughtUpWithIsForgotten(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	r.write("w", 5000, []byte("x"))
	if size, _ := r.e.KnownSize("w", 0); size != 5001 {
		t.Fatalf("KnownSize of dirty data = %d, want 5001", size)
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if size, ok := r.e.KnownSize("w", 5001); !ok || size != 0 {
		t.Fatalf("KnownSize once the backing file has the size = %d, %v; want 0, true", size, ok)
	}
	r.replaceBacking("w", []byte("short"))
	if size, _ := r.e.KnownSize("w", 5); size != 0 {
		t.Fatalf("KnownSize once a shorter file replaced it = %d, want 0", size)
	}

	// Sizes of data not written back: dirty here, or another server's.
	r.write("w", 7000, []byte("y"))
	if size, _ := r.e.KnownSize("w", 9000); size != 7001 {
		t.Fatalf("KnownSize of dirty data under a longer backing file = %d, want 7001", size)
	}
	if err := r.e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.e.ExtendSize(ctx, "w", 20000); err != nil {
		t.Fatal(err)
	}
	if size, _ := r.e.KnownSize("w", 7001); size != 20000 {
		t.Fatalf("KnownSize past the backing file's = %d, want 20000", size)
	}
}
