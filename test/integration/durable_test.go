package integration

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// killServer kills server i of the instance with SIGKILL, waits until it
// is gone, and starts it again with local up over the same cache
// directory, on the same addresses.
func killServer(t *testing.T, in instance, i int) {
	t.Helper()
	victim := readState(t, in.cacheDir).Servers[i].PID
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, victim)
	must(t, "local", "up", "--backing", in.backing, "--mount", in.mount, "--cache-dir", in.cacheDir, "--servers", "1", "--capacity", "256Mi")
}

// TestCloseAfterAServerRestartReportsTheLoss writes to a file that stays
// open, kills the server before it commits the writes, and starts it
// again. The writes are gone with the crash; the close must say so
// instead of reporting them durable.
func TestCloseAfterAServerRestartReportsTheLoss(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1, append(holdDirty, "--server-arg=--commit-interval=1h")...)
	f, err := os.Create(filepath.Join(in.mount, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(randomBytes(3<<20, 7)); err != nil {
		t.Fatal(err)
	}
	killServer(t, in, 0)
	if err := f.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("close after the server lost the writes: %v, want EIO", err)
	}
}
