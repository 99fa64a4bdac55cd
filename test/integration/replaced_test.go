package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReplacedFilesAreSeenAtOpen reads a file through a mount, which
// caches it, replaces it on the backing directory (written under another
// name and renamed over it, as jobs and tools replace files), and opens
// and reads it again without an invalidation: the mount must read the new
// file, as NFS would after the open; and again once it was removed and
// created anew. A file written through the mount is
// not taken for a replacement of itself: read back after write-back, its
// cached data serves. In each of openSetUps: with the client cache the
// mount takes a file of another inode number for another file, whose
// pages its kernel does not hold.
func TestReplacedFilesAreSeenAtOpen(t *testing.T) {
	requireFUSE(t)
	for name, set := range openSetUps {
		t.Run(name, func(t *testing.T) {
			in, st, _ := cachedInput(t, set)

			replaced := randomBytes(3<<20+7, 2)
			if err := replaceBacking(in, "input", replaced); err != nil {
				t.Fatal(err)
			}
			sameFile(t, filepath.Join(in.mount, "input"), replaced)
			if n := replacedFiles(t, in, st); n == 0 {
				t.Error("no server counted a replaced file")
			}
			recreate(t, in, set.clientCache)

			out := randomBytes(2<<20+300, 3)
			writeSynced(t, filepath.Join(in.mount, "out"), out)
			must(t, "local", "flush", "--mount", in.mount, in.mount)
			before := replacedFiles(t, in, st)
			sameFile(t, filepath.Join(in.mount, "out"), out)
			if n := replacedFiles(t, in, st); n != before {
				t.Errorf("reading back a file written through the mount dropped it: %g replaced files, want %g", n, before)
			}
		})
	}
}

// openSetUps are the ways of a mount whose opens see files changed behind
// the cache: the default, whose servers are reached over Unix sockets and
// lend their slab; with a comma in the cache directory's path, over
// loopback TCP, every read through the socket; and with the client cache.
var openSetUps = map[string]openSetUp{
	"slab lent":          {cacheDir: "cache"},
	"through the socket": {cacheDir: "cache,tcp"},
	"client cache":       {cacheDir: "cache", clientCache: true},
}

type openSetUp struct {
	cacheDir    string
	clientCache bool
}

// cachedInput writes a backing file "input", starts two servers and a
// mount over it as set says, and reads it through the mount twice, which
// caches it. It returns the instance, its state and the file's bytes.
func cachedInput(t *testing.T, set openSetUp) (instance, localState, []byte) {
	t.Helper()
	in := dirs(t)
	in.cacheDir = filepath.Join(filepath.Dir(in.cacheDir), set.cacheDir)
	old := randomBytes(2<<20+100, 1)
	if err := os.WriteFile(filepath.Join(in.backing, "input"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	var extra []string
	if set.clientCache {
		extra = append(extra, "--client-cache")
	}
	up(t, in, 2, extra...)
	st := readState(t, in.cacheDir)
	if local := !strings.Contains(set.cacheDir, ","); local != strings.HasPrefix(st.Servers[0].Data, "/") {
		t.Fatalf("server data address %q, want a Unix socket: %v", st.Servers[0].Data, local)
	}
	for range 2 {
		sameFile(t, filepath.Join(in.mount, "input"), old)
	}
	return in, st, old
}

// replaceBacking writes data under another name in the backing directory
// of in and renames it over name, as jobs and tools replace files.
func replaceBacking(in instance, name string, data []byte) error {
	tmp := filepath.Join(in.backing, name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(in.backing, name))
}

// recreate removes the backing file input of in and creates it anew, and
// reads it through the mount: the new bytes. On ext4 the file often gets
// the inode number of the removed one, and another generation: with the
// client cache, the node's kernel must not serve the pages it kept of the
// removed file once it trusts its names and attributes no more (a second).
func recreate(t *testing.T, in instance, clientCache bool) {
	t.Helper()
	p := filepath.Join(in.backing, "input")
	var before syscall.Stat_t
	if err := syscall.Stat(p, &before); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	recreated := randomBytes(2<<20+11, 4)
	if err := os.WriteFile(p, recreated, 0o644); err != nil {
		t.Fatal(err)
	}
	var after syscall.Stat_t
	if err := syscall.Stat(p, &after); err != nil {
		t.Fatal(err)
	}
	t.Logf("the recreated file has inode number %d, the removed one had %d", after.Ino, before.Ino)
	if clientCache {
		time.Sleep(1100 * time.Millisecond)
	}
	sameFile(t, filepath.Join(in.mount, "input"), recreated)
}

// replacedFiles sums the files the servers of in dropped for a replaced
// backing file.
func replacedFiles(t *testing.T, in instance, st localState) float64 {
	t.Helper()
	return serversMetric(t, in, st, "burstcache_replaced_files_total")
}

// serversMetric sums the metric name of the servers of in.
func serversMetric(t *testing.T, in instance, st localState, name string) float64 {
	t.Helper()
	var n float64
	for _, s := range st.Servers {
		n += scrapeMetrics(t, s.Control, "local:"+in.backing)[name]
	}
	return n
}

// TestFileReplacedWhileTheServerIsDownIsSeen reads a file through a
// mount, which caches it, stops the server (cleanly, or with SIGKILL once
// its index committed), replaces the file on the backing directory and
// starts the server again over the same cache directory: the mount must
// read the new file, not the data the restarted server found of the old.
func TestFileReplacedWhileTheServerIsDownIsSeen(t *testing.T) {
	requireFUSE(t)
	for name, sig := range map[string]syscall.Signal{"stopped cleanly": syscall.SIGTERM, "killed": syscall.SIGKILL} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			old := randomBytes(2<<20+100, 1)
			if err := os.WriteFile(filepath.Join(in.backing, "input"), old, 0o644); err != nil {
				t.Fatal(err)
			}
			up(t, in, 1)
			sameFile(t, filepath.Join(in.mount, "input"), old)
			// The index commits within a second.
			time.Sleep(1500 * time.Millisecond)
			replaced := randomBytes(3<<20+7, 2)
			err := stopAndStart(in, 0, sig, 0, func(servers int) error {
				if err := replaceBacking(in, "input", replaced); err != nil {
					return err
				}
				out, err := exec.Command(bin, upArgs(in, servers)...).CombinedOutput()
				if err != nil {
					return fmt.Errorf("local up: %w\n%s", err, out)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sameFile(t, filepath.Join(in.mount, "input"), replaced)
			if n := replacedFiles(t, in, readState(t, in.cacheDir)); n != 1 {
				t.Errorf("the restarted server counted %g replaced files, want 1", n)
			}
		})
	}
}

// TestCreatingANameRemovedBehindTheMount removes a file on the backing
// directory that a mount with the client cache knows, whose kernel trusts
// the name for a second, and at once creates it through the mount: the
// creation must make the file, as on NFS, not fail with ENOENT.
func TestCreatingANameRemovedBehindTheMount(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	if err := os.WriteFile(filepath.Join(in.backing, "out"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	up(t, in, 2, "--client-cache")
	if _, err := os.Stat(filepath.Join(in.mount, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(in.backing, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.mount, "out"), []byte("new"), 0o644); err != nil {
		t.Fatalf("creating a name removed behind the mount: %v", err)
	}
	must(t, "local", "flush", "--mount", in.mount, in.mount)
	if got, err := os.ReadFile(filepath.Join(in.backing, "out")); string(got) != "new" {
		t.Fatalf("backing file: %q, %v", got, err)
	}
}

// TestShorterReplacementOfAWrittenFileShowsItsSize writes a file through
// a mount, writes it back, and replaces it on the backing directory with
// a shorter one: a stat through the mount must show the new size, and a
// read the new bytes and no more, not the size the writes through the
// cache gave the path.
func TestShorterReplacementOfAWrittenFileShowsItsSize(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 3)
	p := filepath.Join(in.mount, "out")
	writeSynced(t, p, randomBytes(3<<20+5, 1))
	must(t, "local", "flush", "--mount", in.mount, in.mount)
	if fi, err := os.Stat(p); err != nil || fi.Size() != 3<<20+5 {
		t.Fatalf("stat after the write-back: %v, %v", fi, err)
	}
	short := randomBytes(1<<20+3, 2)
	if err := replaceBacking(in, "out", short); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(short)) {
		t.Fatalf("stat of the shorter file that replaced it: %v, %v; want size %d", fi.Size(), err, len(short))
	}
	sameFile(t, p, short)
}

// TestDirtyDataOfAFileRemovedBehindTheCacheGoesBackPrivate removes, on the
// backing directory, a private directory whose file holds dirty data in
// the cache: the write-back brings the file back, data whole, and neither
// it nor its directory readable by anyone but its owner, even from servers
// whose umask would let everyone read what they create.
func TestDirtyDataOfAFileRemovedBehindTheCacheGoesBackPrivate(t *testing.T) {
	requireFUSE(t)
	defer syscall.Umask(syscall.Umask(0))
	in := dirs(t)
	up(t, in, 2)
	if err := os.Mkdir(filepath.Join(in.mount, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(3<<20+5, 3)
	if err := os.WriteFile(filepath.Join(in.mount, "private", "f"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(in.backing, "private")); err != nil {
		t.Fatal(err)
	}
	must(t, "local", "flush", "--mount", in.mount, in.mount)
	for p, want := range map[string]os.FileMode{"private": os.ModeDir | 0o700, "private/f": 0o600} {
		if fi, err := os.Stat(filepath.Join(in.backing, p)); err != nil || fi.Mode() != want {
			t.Errorf("%s on the backing directory: %v, %v; want mode %v", p, fi.Mode(), err, want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(in.backing, "private", "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file written back: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
}

// TestFilesOfAFileSystemMountedBeneathTheBackingAreNotServed mounts a file
// system beneath the backing directory, itself on another one, and finds a
// file of each with the same inode number: writes through a file the mount
// holds open must land in it, not in the other file, which a lookup through
// the mount point, refused, made the mount take for the same file. A
// preload of the tree passes over the mount point.
func TestFilesOfAFileSystemMountedBeneathTheBackingAreNotServed(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	mountTmpfs := func(at string) {
		if err := syscall.Mount("tmpfs", at, "tmpfs", 0, "size=16m,mode=755"); err != nil {
			t.Skipf("mounting a tmpfs: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(at, syscall.MNT_DETACH) })
	}
	mountTmpfs(in.backing)
	nested := filepath.Join(in.backing, "nested")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(nested)
	if err := os.WriteFile(filepath.Join(in.backing, "f"), []byte("root file system"), 0o644); err != nil {
		t.Fatal(err)
	}
	ino := func(p string) uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	twin := ""
	for i := range 8 {
		p := filepath.Join(nested, fmt.Sprint("g", i))
		if err := os.WriteFile(p, []byte("nested file system"), 0o644); err != nil {
			t.Fatal(err)
		}
		if ino(p) == ino(filepath.Join(in.backing, "f")) {
			twin = filepath.Base(p)
		}
	}
	if twin == "" {
		t.Skip("no file of the nested tmpfs has the inode number of the outer one's")
	}
	up(t, in, 2)
	f, err := os.OpenFile(filepath.Join(in.mount, "f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := os.Stat(filepath.Join(in.mount, "nested", twin)); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("stat of a file beneath a mount point: %v, want EXDEV", err)
	}
	if _, err := f.WriteAt([]byte("ROOT"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	must(t, "local", "flush", "--mount", in.mount, in.mount)
	// A preload of the tree passes over the mount point, as over a device.
	must(t, "local", "preload", "--mount", in.mount, in.mount)
	if got, err := os.ReadFile(filepath.Join(in.backing, "f")); err != nil || string(got) != "ROOT file system" {
		t.Errorf("file written: %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(nested, twin)); err != nil || string(got) != "nested file system" {
		t.Errorf("file of the nested file system with the same inode number: %q, %v", got, err)
	}
}
