package integration

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestParallelWritesToOneFile has eight writers rewrite their own ranges
// of one file, three times over, in pieces that are not aligned to pages
// or extents, so that neighbours share extents and pages. The file lies
// inside its size, so the kernel lets their direct writes run side by
// side; the mount, and after down the backing directory, must hold the
// last round of every range.
func TestParallelWritesToOneFile(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	const writers, span, piece = 8, 300<<10 + 123, 7000
	p := filepath.Join(in.mount, "shared")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, writers*span); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for round := range 3 {
		want = randomBytes(writers*span, byte(40+round))
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for w := range writers {
			wg.Go(func() { errs[w] = writeRange(p, want[w*span:(w+1)*span], int64(w*span), piece) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		sameFile(t, p, want)
	}
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "shared"), want)
}

// writeRange writes data at off of path through a write-only descriptor,
// piece bytes at a time.
func writeRange(path string, data []byte, off int64, piece int) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	for i := 0; i < len(data); i += piece {
		if _, err := f.WriteAt(data[i:min(i+piece, len(data))], off+int64(i)); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
