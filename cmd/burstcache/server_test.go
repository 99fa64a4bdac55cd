package main

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/engine"
)

// TestSpentCacheFiles: only a drained server with nothing dirty removes
// its cache files; a failed cache device does not keep them, since all
// was written back, but any other failure of the last commit does.
func TestSpentCacheFiles(t *testing.T) {
	deviceErr := fmt.Errorf("%w: fdatasync of the slab: %w", engine.ErrCacheDevice, syscall.EIO)
	for _, tc := range []struct {
		name     string
		closeErr error
		drained  bool
		st       engine.Stats
		want     bool
	}{
		{name: "drained, clean", drained: true, want: true},
		{name: "drained, clean, device failed", closeErr: deviceErr, drained: true, want: true},
		{name: "drained, dirty, device failed", closeErr: deviceErr, drained: true, st: engine.Stats{DirtyBytes: 1, DirtyExtents: 1}},
		{name: "drained, clean, index commit failed", closeErr: errors.New("bbolt: disk full"), drained: true},
		{name: "not drained", st: engine.Stats{}},
		{name: "drained, dirty", drained: true, st: engine.Stats{DirtyBytes: 4096, DirtyExtents: 1}},
	} {
		if got := spent(tc.closeErr, tc.drained, tc.st); got != tc.want {
			t.Errorf("%s: spent = %v, want %v", tc.name, got, tc.want)
		}
	}
}
