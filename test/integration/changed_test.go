package integration

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestFilesChangedInPlaceAreSeenAtOpen reads a file through a mount, which
// caches it, writes it over in place on the backing directory (the same
// inode, cut and written again, as cp over an existing file does), and
// opens and reads it again without an invalidation: the mount must read
// the new version, longer or shorter, as NFS would after the open. In
// each of openSetUps: with the client cache, the kernel keeps the size and
// pages of the file it read.
func TestFilesChangedInPlaceAreSeenAtOpen(t *testing.T) {
	requireFUSE(t)
	for name, set := range openSetUps {
		t.Run(name, func(t *testing.T) {
			in, st, _ := cachedInput(t, set)
			for i, data := range [][]byte{randomBytes(3<<20+7, 2), randomBytes(1<<20-9, 3)} {
				before := replacedFiles(t, in, st)
				changeInPlace(t, filepath.Join(in.backing, "input"), data)
				if set.clientCache {
					// Until the kernel trusts the name no more.
					time.Sleep(1100 * time.Millisecond)
				}
				sameFile(t, filepath.Join(in.mount, "input"), data)
				if n := replacedFiles(t, in, st); n == before {
					t.Errorf("change %d: no server dropped the extents of the earlier version", i+1)
				}
			}
		})
	}
}

// changeInPlace writes data over the file p in place, once the clock of
// its file system has moved past p's change time, and checks that p kept
// its inode and its change time moved.
func changeInPlace(t *testing.T, p string, data []byte) {
	t.Helper()
	var before, after syscall.Stat_t
	if err := syscall.Stat(p, &before); err != nil {
		t.Fatal(err)
	}
	// ext4 keeps times to a clock tick.
	time.Sleep(20 * time.Millisecond)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(p, &after); err != nil {
		t.Fatal(err)
	}
	if after.Ino != before.Ino || after.Ctim.Nano() <= before.Ctim.Nano() {
		t.Fatalf("%s changed in place: inode %d, change time %d; before %d, %d", p, after.Ino, after.Ctim.Nano(), before.Ino, before.Ctim.Nano())
	}
}

// TestReadFilesWrittenThroughTheCacheStayWhole reads a file of the backing
// directory through three servers, which copy it up and keep the version
// they copied, then writes into it and past its end through the mount
// and writes it back: those write-backs move the file's change time, which
// the servers must not take for a change behind the cache that loses the
// bytes or the size the writes gave the file, before or after the
// write-back: at most they copy up again what they copied before.
func TestReadFilesWrittenThroughTheCacheStayWhole(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	orig := randomBytes(5<<20+300, 1)
	if err := os.WriteFile(filepath.Join(in.backing, "f"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	up(t, in, 3)
	p := filepath.Join(in.mount, "f")
	sameFile(t, p, orig)

	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	patch, tail := randomBytes(4000, 2), randomBytes(2<<20+77, 3)
	if _, err := f.WriteAt(patch, 2<<20+100); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(tail, int64(len(orig))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(orig, tail)
	copy(want[2<<20+100:], patch)
	sameFile(t, p, want)
	must(t, "local", "flush", "--mount", in.mount, in.mount)
	for range 2 {
		sameFile(t, p, want)
		if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(want)) {
			t.Fatalf("stat after the write-back: %v, %v; want %d bytes", fi, err, len(want))
		}
	}
	sameFile(t, filepath.Join(in.backing, "f"), want)
}
