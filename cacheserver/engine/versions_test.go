package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// errCommitsFail is what a full cache disk says.
var errCommitsFail = fmt.Errorf("injected index commit failure: %w", syscall.ENOSPC)

// TestRestartNeverWritesAnOlderVersionBack: an extent that the index
// calls dirty is written back, rewritten (into another slot, copy-on-write)
// and written back again. A restart after a crash before the next commit
// found the first version dirty in the index and wrote it back over the
// second, which the backing file held: the file read "firstd". The second
// write-back now waits for a commit that forgets the first version; while
// commits fail it fails, and the backing file keeps the first version.
func TestRestartNeverWritesAnOlderVersionBack(t *testing.T) {
	for _, failing := range []bool{false, true} {
		name := map[bool]string{false: "commits work", true: "commits fail"}[failing]
		t.Run(name, func(t *testing.T) {
			crash := vfs.NewCrashable(vfs.OS{}, 1)
			fsys := &vfs.FailingCommits{FS: crash, Err: errCommitsFail}
			r := newRig(t, modelES, 6, func(c *Config) {
				crashable(t, c, crash)
				c.FS = fsys
			})
			ctx := context.Background()
			r.write("f", 0, []byte("first"))
			if err := r.e.Sync(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			fsys.Fail.Store(failing)
			if err := r.e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			r.write("f", 0, []byte("second"))
			err := r.e.Flush(ctx)
			want := "second"
			if failing {
				want = "first"
				if !errors.Is(err, ErrDirtyLeft) || !errors.Is(err, errCommitsFail) || !strings.Contains(err.Error(), "older version") {
					t.Fatalf("Flush of the second version while commits fail = %v, want ErrDirtyLeft wrapping the commit's failure", err)
				}
				// The cache directory failed, not the backing store.
				if s := r.e.Stats(); !s.WriteBackFailing || s.WriteBackRefused {
					t.Fatalf("while commits fail: WriteBackFailing %v, WriteBackRefused %v", s.WriteBackFailing, s.WriteBackRefused)
				}
			} else if err != nil {
				t.Fatalf("Flush of the second version: %v", err)
			}
			if got := string(r.backingFile("f")); got != want {
				t.Fatalf("backing file before the crash = %q, want %q", got, want)
			}
			r.crash(crash)
			if err := r.e.Flush(ctx); err != nil {
				t.Fatalf("Flush after the restart: %v", err)
			}
			if got := string(r.backingFile("f")); got != want {
				t.Fatalf("backing file after a crash and a restart = %q, want %q", got, want)
			}
		})
	}
}
