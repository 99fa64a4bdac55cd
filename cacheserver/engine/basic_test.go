package engine

import (
	"bytes"
	"context"
	"errors"
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
