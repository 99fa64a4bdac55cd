package integration

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// windowArg gives the servers of a test instance (256 MiB each) a write
// window of about 2.5 MiB, which the 8 MiB the tests write use up.
const windowArg = "--server-arg=--write-window-multiplier=0.01"

// TestWriteWindowKeepsPagesTheKernelTook uses up the write window with
// pages the kernel writes back after the job was told they were written:
// through a mount with the client cache, and through a shared mapping of
// a mount without it. The job cannot retry them, and the kernel drops a
// page whose write fails, so no page may be refused: every byte reaches
// the backing directory after down. A write(2) past the window, which its
// caller sees fail, is still refused with EROFS.
func TestWriteWindowKeepsPagesTheKernelTook(t *testing.T) {
	requireFUSE(t)
	want := randomBytes(8<<20, 9)
	for name, tc := range map[string]struct {
		args  []string
		write func(t *testing.T, path string, data []byte)
	}{
		"client cache":   {args: []string{windowArg, "--client-cache"}, write: writeWhole},
		"shared mapping": {args: []string{windowArg}, write: writeMapped},
	} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 1, tc.args...)
			tc.write(t, filepath.Join(in.mount, "f"), want)
			if name == "shared mapping" {
				err := os.WriteFile(filepath.Join(in.mount, "g"), []byte("refused"), 0o644)
				if !errors.Is(err, syscall.EROFS) {
					t.Errorf("write(2) past the window: %v, want EROFS", err)
				}
			}
			must(t, "local", "down", "--mount", in.mount)
			sameFile(t, filepath.Join(in.backing, "f"), want)
		})
	}
}

// writeWhole writes data to path with write(2), and closes it.
func writeWhole(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeMapped writes data to path through a shared mapping, and unmaps
// and closes it.
func writeMapped(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(m, data)
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Errorf("msync: %v", err)
	}
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
