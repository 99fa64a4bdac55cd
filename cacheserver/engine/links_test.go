package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// TestHardLinksShareData writes through one name of a file with two names
// and reads through the other, on the same engine and on a second engine
// over the same backing store (another server), before and after a flush:
// every read sees the last write, and nothing of the file stays cached.
func TestHardLinksShareData(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	other := newRig(t, 4096, 8, nil)
	other.cfg.Backing = r.faulty
	other.restart()
	ctx := context.Background()
	r.writeBacking("a", bytes.Repeat([]byte("o"), 10000))
	if err := os.Link(filepath.Join(r.root, "a"), filepath.Join(r.root, "b")); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("o"), 10000)
	steps := []struct {
		e         *rig
		name      string
		off       int64
		data      string
		readsFrom []*rig
	}{
		{r, "a", 100, "first", []*rig{r, other}},
		{other, "b", 5000, "second", []*rig{r, other}},
		{r, "b", 9998, "grows past the end", []*rig{r, other}},
	}
	for _, s := range steps {
		s.e.write(s.name, s.off, []byte(s.data))
		want = append(want[:min(int64(len(want)), s.off)], append([]byte(s.data), want[min(int64(len(want)), s.off+int64(len(s.data))):]...)...)
		for _, rd := range s.readsFrom {
			for _, n := range []string{"a", "b"} {
				if got := rd.readAll(n); !bytes.Equal(got, want) {
					t.Fatalf("after writing %q to %s, %s reads %d bytes that differ from the %d written", s.data, s.name, n, len(got), len(want))
				}
			}
		}
	}
	for _, e := range []*rig{r, other} {
		if err := e.e.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st := e.e.Stats(); st.CachedBytes != 0 || st.DirtyBytes != 0 {
			t.Errorf("the engine caches %d bytes (%d dirty) of a file with two names", st.CachedBytes, st.DirtyBytes)
		}
	}
	if got := r.backingFile("a"); !bytes.Equal(got, want) {
		t.Fatalf("the backing file holds %d bytes that differ from the %d written", len(got), len(want))
	}
}

// TestSyncOfLinkedFileReachesBacking checks that Sync of a file with two
// names fsyncs the backing file even with Durability Cache: its writes
// went there, not to the cache device.
func TestSyncOfLinkedFileReachesBacking(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	r.writeBacking("a", []byte("old"))
	if err := os.Link(filepath.Join(r.root, "a"), filepath.Join(r.root, "b")); err != nil {
		t.Fatal(err)
	}
	r.write("b", 0, []byte("new"))
	before := r.faulty.Calls(backing.OpSync)
	if err := r.e.Sync(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if r.faulty.Calls(backing.OpSync) != before+1 {
		t.Fatalf("Sync of a file whose writes passed through did not fsync the backing file")
	}
}

// TestTruncateOfLinkedFileLeavesNoStaleSize truncates a file with two
// names through one name, then shorter through the other on the backing
// store (as another server's engine, or another node, does), and removes
// the other name: the file, with one name again, must have the size of the
// last truncation, not the first.
func TestTruncateOfLinkedFileLeavesNoStaleSize(t *testing.T) {
	r := newRig(t, 4096, 8, nil)
	ctx := context.Background()
	data := bytes.Repeat([]byte("o"), 10000)
	r.writeBacking("a", data)
	if err := os.Link(filepath.Join(r.root, "a"), filepath.Join(r.root, "b")); err != nil {
		t.Fatal(err)
	}
	if err := r.e.Truncate(ctx, "a", 9000); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(r.root, "b"), 3000); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(r.root, "b")); err != nil {
		t.Fatal(err)
	}
	// The first read copies the file up: the second reads the cache.
	for i := range 2 {
		if got := r.readAll("a"); !bytes.Equal(got, data[:3000]) {
			t.Errorf("read %d of a: %d bytes, want the 3000 the last truncation left", i, len(got))
		}
	}
	if size, ok := r.e.KnownSize("a", 0); ok && size > 3000 {
		t.Errorf("KnownSize(a) = %d, want at most 3000", size)
	}
}
