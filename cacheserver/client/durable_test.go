package client

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/server/servertest"
)

// syncedOn returns the servers of in that were asked to sync p.
func syncedOn(in *servertest.Instance, p string) []int {
	var got []int
	for i, c := range in.Caches {
		if slices.Contains(c.Calls, "sync "+p) {
			got = append(got, i)
		}
	}
	return got
}

// writtenThenRestarted returns a client of two servers that wrote file
// "f" on both, after which server 1 restarted, as after a crash: what it
// took is gone.
func writtenThenRestarted(t *testing.T) *FS {
	t.Helper()
	f, in := setup(t, 2)
	create(t, f, "f")
	if _, err := f.WriteAt(context.Background(), "f", randomData(2*testExtent), 0); err != nil {
		t.Fatal(err)
	}
	in.Restart(t, 1)
	return f
}

// TestSyncAfterARestartReportsTheLoss restarts a server that took writes
// of a file before they were made durable, as a crash would: the close
// and the fsync that follow must fail with EIO, once, instead of making
// nothing durable and reporting success.
func TestSyncAfterARestartReportsTheLoss(t *testing.T) {
	for name, sync := range map[string]func(*FS, context.Context, string) error{
		"close": (*FS).Flush,
		"fsync": (*FS).Fsync,
	} {
		t.Run(name, func(t *testing.T) {
			f := writtenThenRestarted(t)
			ctx := context.Background()
			if err := sync(f, ctx, "f"); !errors.Is(err, ErrServerRestarted) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("%s after a restart lost writes: %v, want ErrServerRestarted (EIO)", name, err)
			}
			if err := sync(f, ctx, "f"); err != nil {
				t.Fatalf("second %s: %v, want the loss reported once", name, err)
			}
		})
	}
}

// TestRestartBetweenWritesIsCaught restarts a server between two writes of
// a file that the sync then finds on one incarnation: the first write went
// with the old one.
func TestRestartBetweenWritesIsCaught(t *testing.T) {
	f, in := setup(t, 1)
	ctx := context.Background()
	create(t, f, "f")
	if _, err := f.WriteAt(ctx, "f", []byte("lost"), 0); err != nil {
		t.Fatal(err)
	}
	in.Restart(t, 0)
	// The first call after the restart may find the old connection broken.
	for range 2 {
		if _, err := f.WriteAt(ctx, "f", []byte("kept"), testExtent); err == nil {
			break
		}
	}
	if err := f.Flush(ctx, "f"); !errors.Is(err, ErrServerRestarted) {
		t.Fatalf("close after writes on both sides of a restart: %v, want ErrServerRestarted", err)
	}
}

// TestCloseMakesLateWritesDurable: writes that come after the last close
// of a file (the kernel writes a shared mapping back when it is unmapped)
// are made durable when the client closes, whose error says if they could
// not be.
func TestCloseMakesLateWritesDurable(t *testing.T) {
	f, in := setup(t, 3)
	ctx := context.Background()
	create(t, f, "late")
	data := randomData(3 * testExtent)
	if _, err := f.WriteAt(ctx, "late", data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := syncedOn(in, "late"); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("servers synced by Close: %v, want every server the writes went to", got)
	}
}

// TestCloseReportsLateWritesLost: a server that restarted before the
// client closed lost writes that no close made durable; Close says so.
func TestCloseReportsLateWritesLost(t *testing.T) {
	f, in := setup(t, 1)
	create(t, f, "late")
	if _, err := f.WriteAt(context.Background(), "late", []byte("gone"), 0); err != nil {
		t.Fatal(err)
	}
	in.Restart(t, 0)
	if err := f.Close(); !errors.Is(err, ErrServerRestarted) {
		t.Fatalf("Close after the server lost unsynced writes: %v, want ErrServerRestarted", err)
	}
}

// TestRenameAfterARestartReportsTheLoss restarts a server that took writes
// of a file before they were made durable, then renames or links the file.
// Both write the file back and settle what this client wrote, so no later
// close would see the loss: the rename or link itself must fail with EIO,
// and leave the names as they were.
func TestRenameAfterARestartReportsTheLoss(t *testing.T) {
	for name, move := range movesOfF {
		t.Run(name, func(t *testing.T) {
			f := writtenThenRestarted(t)
			ctx := context.Background()
			if err := move(f, ctx); !errors.Is(err, ErrServerRestarted) {
				t.Fatalf("%s after a restart lost writes: %v, want ErrServerRestarted (EIO)", name, err)
			}
			if _, err := f.GetAttr(ctx, "g"); !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("new name after a failed %s: %v, want ENOENT", name, err)
			}
			if err := f.Flush(ctx, "f"); err != nil {
				t.Fatalf("close after the failed %s: %v, want the loss reported once", name, err)
			}
		})
	}
}

// TestWriteBackLeavesTheSyncToTheClose writes a file back before a time is
// set on it: every server writes it out without evicting it, and the
// close that follows must still make it durable on the servers the writes
// went to, since the write-out made nothing durable.
func TestWriteBackLeavesTheSyncToTheClose(t *testing.T) {
	f, in := setup(t, 2)
	ctx := context.Background()
	create(t, f, "f")
	if _, err := f.WriteAt(ctx, "f", randomData(2*testExtent), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteBack(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	for i, c := range in.Caches {
		if !slices.Contains(c.Calls, "writeout f") || slices.Contains(c.Calls, "evict f") {
			t.Errorf("server %d calls after WriteBack: %q, want a write-out and no eviction", i, c.Calls)
		}
	}
	if err := f.Flush(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if got := syncedOn(in, "f"); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("servers synced by the close after WriteBack: %v, want both the writes went to", got)
	}
}

// TestCloseAfterWriteBackReportsTheLoss restarts a server that took writes
// of a file before they were made durable, then writes the file back, as
// before a time is set on it: the close that follows must fail with EIO.
func TestCloseAfterWriteBackReportsTheLoss(t *testing.T) {
	f := writtenThenRestarted(t)
	ctx := context.Background()
	if err := f.WriteBack(ctx, "f"); err != nil {
		t.Fatalf("WriteBack after a restart: %v", err)
	}
	if err := f.Flush(ctx, "f"); !errors.Is(err, ErrServerRestarted) {
		t.Fatalf("close after a restart lost writes and a write-back: %v, want ErrServerRestarted", err)
	}
}
