package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// TestSpentCacheFiles: only a drained server with nothing dirty removes
// its cache files.
func TestSpentCacheFiles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drained bool
		st      engine.Stats
		want    bool
	}{
		{name: "drained, clean", drained: true, want: true},
		{name: "drained, one dirty byte", drained: true, st: engine.Stats{DirtyBytes: 1, DirtyExtents: 1}},
		{name: "not drained", st: engine.Stats{}},
		{name: "drained, dirty", drained: true, st: engine.Stats{DirtyBytes: 4096, DirtyExtents: 1}},
	} {
		if got := spent(tc.drained, tc.st); got != tc.want {
			t.Errorf("%s: spent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

var errDiskFull = errors.New("index commit: no space left on device")

// TestRetireAfterAFailedLastCommit: a drained server whose last commit
// fails still removes its cache files, since every byte is in the backing
// store. Kept, the index of the commit before, which calls the file dirty,
// would have the next start over the directory write it back again, over
// whatever the backing file holds by then. A server that was not drained
// keeps them, and says why.
func TestRetireAfterAFailedLastCommit(t *testing.T) {
	for _, drained := range []bool{true, false} {
		root := t.TempDir()
		pfs, dir := filepath.Join(root, "pfs"), filepath.Join(root, "cache", "server-0")
		if err := os.MkdirAll(pfs, 0o755); err != nil {
			t.Fatal(err)
		}
		fsys := &vfs.FailingCommits{FS: vfs.OS{}, Err: errDiskFull}
		eng, err := engine.Open(engine.Config{Dir: dir, Backing: backing.NewDir(pfs), ExtentSize: 4096, Capacity: 64 * 4096, FS: fsys,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		write := func(data string) {
			t.Helper()
			if _, err := eng.WriteAt(ctx, "f", []byte(data), 0); err != nil {
				t.Fatal(err)
			}
		}
		write("first")
		if err := eng.Sync(ctx, "f"); err != nil {
			t.Fatal(err)
		}
		// From here on the index keeps calling "first" dirty: its
		// write-back is never committed.
		fsys.Fail.Store(true)
		if err := eng.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		err = retire(eng, drained, false, slog.New(slog.NewTextHandler(io.Discard, nil)))
		_, statErr := os.Stat(dir)
		if drained && (err != nil || !os.IsNotExist(statErr)) {
			t.Errorf("drained: retire = %v, cache files: %v; want them removed", err, statErr)
		}
		if !drained && (!errors.Is(err, errDiskFull) || statErr != nil) {
			t.Errorf("not drained: retire = %v, cache files: %v; want the commit's error and the files kept", err, statErr)
		}
		if got, _ := os.ReadFile(filepath.Join(pfs, "f")); string(got) != "first" {
			t.Errorf("backing file = %q, want %q", got, "first")
		}
	}
}
