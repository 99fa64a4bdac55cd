package client

import (
	"context"
	"errors"
	"syscall"
	"testing"
)

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
			f, in := setup(t, 2)
			ctx := context.Background()
			create(t, f, "f")
			if _, err := f.WriteAt(ctx, "f", randomData(2*testExtent), 0); err != nil {
				t.Fatal(err)
			}
			in.Restart(t, 1)
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
