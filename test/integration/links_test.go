package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestHardLinksShareData writes through one name of a hard-linked file and
// reads through the other, on the same mount and on a second mount of the
// same three servers, then after one name is removed and the instance is
// taken down: every read sees the last write through either name.
func TestHardLinksShareData(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 3)
	other := mountAgain(t, in)
	want := randomBytes(5<<20+123, 3)
	if err := os.WriteFile(filepath.Join(in.mount, "a"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(in.mount, "a"), filepath.Join(in.mount, "b")); err != nil {
		t.Fatal(err)
	}
	writes := []struct {
		mount, name string
		off         int64
		data        []byte
	}{
		{in.mount, "b", 1<<20 - 10, randomBytes(3<<20, 4)},
		{other, "a", 2<<20 + 5, randomBytes(100, 5)},
		{other, "b", int64(len(want)) - 50, randomBytes(2<<20, 6)},
	}
	for _, w := range writes {
		writeAt(t, filepath.Join(w.mount, w.name), w.data, w.off)
		end := w.off + int64(len(w.data))
		if end > int64(len(want)) {
			want = append(want, make([]byte, end-int64(len(want)))...)
		}
		copy(want[w.off:], w.data)
		for _, m := range []string{in.mount, other} {
			for _, n := range []string{"a", "b"} {
				got, err := os.ReadFile(filepath.Join(m, n))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("after a write to %s at %d, %s reads %d bytes that differ from the %d written", w.name, w.off, filepath.Join(m, n), len(got), len(want))
				}
			}
		}
	}
	// Removing a name whose file is still dirty keeps the data for the
	// other name.
	last := randomBytes(3<<20, 7)
	writeAt(t, filepath.Join(in.mount, "b"), last, 1<<20)
	copy(want[1<<20:], last)
	if err := os.Remove(filepath.Join(other, "b")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(in.mount, "a")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a after b was removed: %d bytes, %v; want the %d written", len(got), err, len(want))
	}
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "a"), want)
	if _, err := os.Stat(filepath.Join(in.backing, "b")); !os.IsNotExist(err) {
		t.Fatalf("b after its removal: %v, want it gone", err)
	}
}

func writeAt(t *testing.T, path string, data []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTruncateThroughOtherNameLeavesNoStaleSize truncates a file with two
// names through one name, then shorter through the other, removes the
// other name, and reads and appends through the first: as on a plain
// directory, the file must have the size of the last truncation, plus the
// append.
func TestTruncateThroughOtherNameLeavesNoStaleSize(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 3)
	a, b := filepath.Join(in.mount, "a"), filepath.Join(in.mount, "b")
	data := randomBytes(3<<20, 40)
	if err := os.WriteFile(a, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(a, 5<<19); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(b, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	want := data[:1<<20]
	// The first read copies the file up: the second reads the cache.
	for i := range 2 {
		got, err := os.ReadFile(a)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("read %d of a: %d bytes (%v), want %d; first difference at %d", i, len(got), err, len(want), firstDifference(got, want))
		}
	}
	f, err := os.OpenFile(a, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("end")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(append([]byte(nil), want...), "end"...)
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "a"), want)
}
