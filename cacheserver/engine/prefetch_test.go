package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// readLog is a backing store that records which extents were read.
type readLog struct {
	backing.Store
	es    int64
	mu    sync.Mutex
	reads map[int64]bool
}

func (r *readLog) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	r.mu.Lock()
	r.reads[off/r.es] = true
	r.mu.Unlock()
	return r.Store.ReadAt(ctx, p, b, off)
}

func (r *readLog) extents() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for idx := range r.reads {
		out = append(out, idx)
	}
	slices.Sort(out)
	return out
}

// TestPrefetchFollowsTheStride reads extents 0 and 3 of a file through an
// engine that holds every third extent, as one of three striped servers
// does: read-ahead must copy up the next extents of this server (6, 9), and
// never the neighbours that other servers hold.
func TestPrefetchFollowsTheStride(t *testing.T) {
	const es, stride = 64 << 10, 3
	root := t.TempDir()
	log := &readLog{Store: backing.NewDir(root), es: es, reads: map[int64]bool{}}
	r := &rig{t: t, root: root}
	r.writeBacking("f", make([]byte, 12*es))
	r.cfg = Config{
		Dir: filepath.Join(t.TempDir(), "cache"), Backing: log, ExtentSize: es, Capacity: 16 * es,
		Stride: stride, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	r.open()
	t.Cleanup(func() { r.e.Close() })
	buf := make([]byte, es)
	for _, idx := range []int64{0, 3} {
		if _, err := r.e.ReadAt(context.Background(), "f", buf, idx*es); err != nil {
			t.Fatalf("read extent %d: %v", idx, err)
		}
	}
	// The reads start the read-ahead before they return, and it holds the
	// engine active until it ends: once nothing is active, every backing
	// read the two reads caused is in the log, however slowly it ran.
	waitFor(t, func() bool {
		r.e.mu.Lock()
		defer r.e.mu.Unlock()
		return r.e.active == 0
	})
	got := log.extents()
	for _, idx := range got {
		if idx%stride != 0 {
			t.Fatalf("backing extents read %v: extent %d belongs to another server", got, idx)
		}
	}
	if !slices.Contains(got, 6) || !slices.Contains(got, 9) {
		t.Fatalf("backing extents read %v: want read-ahead of 6 and 9", got)
	}
}
