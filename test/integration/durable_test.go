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

// TestMappedWritesAfterCloseSurviveAServerCrash writes a file through a
// shared mapping after its descriptor was closed. The kernel sends those
// writes when the mapping goes, after the last close: stopping the mount
// must make them durable, so that a crash of the server afterwards loses
// nothing, as it loses nothing of a closed file.
func TestMappedWritesAfterCloseSurviveAServerCrash(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1, append(holdDirty, "--server-arg=--commit-interval=1h")...)
	data := randomBytes(2<<20, 8)
	writeMappedAfterClose(t, filepath.Join(in.mount, "mapped"), data)
	mount := readState(t, in.cacheDir).MountPID
	if err := syscall.Kill(mount, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitGone(t, mount)
	killServer(t, in, 0)
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "mapped"), data)
}

// writeMappedAfterClose creates path with len(data) bytes, maps it shared,
// closes the descriptor, copies data into the mapping and unmaps it.
func writeMappedAfterClose(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	copy(m, data)
	if err := syscall.Munmap(m); err != nil {
		t.Fatal(err)
	}
}
