package integration

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/placement"
)

// windowArg gives the servers of a test instance (256 MiB each) a write
// window of about 2.5 MiB, which the 8 MiB the tests write use up.
const windowArg = "--server-arg=--write-window-multiplier=0.01"

// TestWriteWindowKeepsPagesTheKernelTook uses up the write window with
// pages the kernel writes back after the job was told they were written:
// through a mount with the client cache, and through a shared mapping of
// a mount without it. The job cannot retry them, and the kernel drops a
// page whose write fails, so no page may be refused: every byte reaches
// the backing directory after down. Past the window a job is refused where
// it can act on it, with EROFS: at open for writing, or at write(2) through
// a file it opened before; it may still read.
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
			f := filepath.Join(in.mount, "f")
			tc.write(t, f, want)
			refusedPastTheWindow(t, f)
			must(t, "local", "down", "--mount", in.mount)
			sameFile(t, filepath.Join(in.backing, "f"), want)
		})
	}
}

// refusedPastTheWindow checks that, with the write window used up, a
// create and an open of f for writing fail with EROFS, and a read of f
// does not.
func refusedPastTheWindow(t *testing.T, f string) {
	t.Helper()
	err := os.WriteFile(filepath.Join(filepath.Dir(f), "g"), []byte("refused"), 0o644)
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("create past the window: %v, want EROFS", err)
	}
	if w, err := os.OpenFile(f, os.O_WRONLY, 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("open for writing past the window: %v, want EROFS", err)
		if err == nil {
			w.Close()
		}
	}
	if _, err := os.ReadFile(f); err != nil {
		t.Errorf("read past the window: %v", err)
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

// TestMaxFilesRefusesCreates checks that a create past the limit on files
// fails with EDQUOT, with the client cache too, whose writes reach the
// servers only as page write-back, which passes the limit; files the cache
// holds may still be written. A file of the backing directory that the
// cache does not hold counts as a new one: opening it for writing fails
// with EDQUOT, and it can still be read.
func TestMaxFilesRefusesCreates(t *testing.T) {
	requireFUSE(t)
	for name, args := range map[string][]string{
		"no client cache": {"--server-arg=--max-files=2"},
		"client cache":    {"--server-arg=--max-files=2", "--client-cache"},
	} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			old := []byte("from before")
			writeWhole(t, filepath.Join(in.backing, "old"), old)
			up(t, in, 1, args...)
			for _, n := range []string{"a", "b"} {
				writeWhole(t, filepath.Join(in.mount, n), []byte(n))
			}
			err := os.WriteFile(filepath.Join(in.mount, "c"), []byte("c"), 0o644)
			if !errors.Is(err, syscall.EDQUOT) {
				t.Errorf("create past maxFiles: %v, want EDQUOT", err)
			}
			if err := overwrite(filepath.Join(in.mount, "old"), []byte("new")); !errors.Is(err, syscall.EDQUOT) {
				t.Errorf("writing a file the cache does not hold past maxFiles: %v, want EDQUOT", err)
			}
			sameFile(t, filepath.Join(in.mount, "old"), old)
			writeWhole(t, filepath.Join(in.mount, "a"), []byte("again"))
			must(t, "local", "down", "--mount", in.mount)
			sameFile(t, filepath.Join(in.backing, "a"), []byte("again"))
			sameFile(t, filepath.Join(in.backing, "old"), old)
			if _, err := os.Stat(filepath.Join(in.backing, "c")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused create left c on the backing directory: %v", err)
			}
		})
	}
}

// overwrite opens an existing file for writing, writes data at its start
// and closes it, and returns the first error.
func overwrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	return errors.Join(err, f.Close())
}

// TestWriteRefusedFirstLandsWhole writes across an extent boundary, from
// an extent of a server whose write window is used up into one of a server
// with room: the second piece lands, so the first, refused, is sent again
// past the window, and the write lands whole. Failing it would leave bytes
// past a refused hole, to be written back, which write(2) never does. A
// write that only the full server takes still fails with EROFS.
func TestWriteRefusedFirstLandsWhole(t *testing.T) {
	requireFUSE(t)
	const extent = 1 << 20
	l := placement.Layout{Servers: 2, ExtentSize: extent}
	in := dirs(t)
	x, y := nameOn(l, "x", 0), nameOn(l, "y", 0)
	writeWhole(t, filepath.Join(in.backing, x), make([]byte, 2*extent))
	up(t, in, 2, "--server-arg=--write-window-multiplier=0.016")
	xf, err := os.OpenFile(filepath.Join(in.mount, x), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer xf.Close()
	buf, err := unix.Mmap(-1, 0, extent, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	yf, err := os.OpenFile(filepath.Join(in.mount, y), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer yf.Close()
	// Even extents of y are on server 0: fill its window.
	for e := int64(0); ; e += 2 {
		if _, err := unix.Pwrite(int(yf.Fd()), buf, e*extent); errors.Is(err, syscall.EROFS) {
			break
		} else if err != nil || e > 16 {
			t.Fatalf("filling the window of server 0: %v at extent %d", err, e)
		}
	}
	copy(buf, bytes.Repeat([]byte("x"), extent))
	if n, err := unix.Pwrite(int(xf.Fd()), buf, extent/2); n != extent || err != nil {
		t.Errorf("write refused on server 0 and taken on server 1: %d, %v; want %d, nil", n, err, extent)
	}
	if _, err := unix.Pwrite(int(xf.Fd()), buf[:10], 0); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write to server 0 only past its window: %v, want EROFS", err)
	}
	xf.Close()
	yf.Close()
	must(t, "local", "down", "--mount", in.mount)
	want := make([]byte, 2*extent)
	copy(want[extent/2:], buf)
	sameFile(t, filepath.Join(in.backing, x), want)
}
