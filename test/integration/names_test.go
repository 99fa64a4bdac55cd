package integration

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// oddNames are file names that real file systems hold: bytes that are not
// UTF-8 (Latin-1 from older systems, or any), characters that text
// formats escape or split on, names that look like options or like the
// special entries, and the longest name a directory takes.
var oddNames = []string{
	"caf\xe9",
	"\xff\xfe\x80",
	"caf\uFFFD",
	"new\nline",
	"tab\there",
	`back\slash`,
	`"quoted"`,
	"-rf",
	"...",
	" ",
	strings.Repeat("\xe9", 255),
}

// longPath is a path of Latin-1 names, near PATH_MAX once under a mount.
var longPath = strings.Repeat(strings.Repeat("\xe9", 250)+"/", 15) + "f"

// TestOddNamesGoByteForByte writes files of odd names through the mount,
// each in a directory of the same name, and flushes each by its path: the
// backing file must then hold its data. Renames and an unlink while open
// follow; after down, the backing directory holds exactly the names and
// the bytes that a plain directory would.
func TestOddNamesGoByteForByte(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	want := map[string][]byte{}
	for i, name := range append(slices.Clone(oddNames), longPath) {
		p := filepath.Join(name, "data")
		if name != longPath {
			p = filepath.Join(name, name)
		}
		data := randomBytes(1<<20+4096*(i+1), byte(i))
		writeThrough(t, in.mount, p, data)
		sameFile(t, filepath.Join(in.mount, p), data)
		must(t, "local", "flush", "--mount", in.mount, filepath.Join(in.mount, p))
		sameFile(t, filepath.Join(in.backing, p), data)
		want[p] = data
	}
	for _, name := range oddNames[:4] {
		from, to := filepath.Join(name, name), filepath.Join(name, "renamed "+name)
		if err := os.Rename(filepath.Join(in.mount, from), filepath.Join(in.mount, to)); err != nil {
			t.Fatal(err)
		}
		want[to] = want[from]
		delete(want, from)
	}
	unlinked := filepath.Join(oddNames[0], "renamed "+oddNames[0])
	f, err := os.OpenFile(filepath.Join(in.mount, unlinked), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(filepath.Join(in.mount, unlinked)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("after the unlink"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	delete(want, unlinked)
	must(t, "local", "down", "--mount", in.mount)
	got := filesUnder(t, in.backing)
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("backing directory holds %q, which no file of the job has", p)
		}
	}
	for p, data := range want {
		if !bytes.Equal(got[p], data) {
			t.Errorf("backing %q holds %d bytes that differ from the %d written", p, len(got[p]), len(data))
		}
	}
}

// TestInvalidateOfANameNotUTF8 changes a file named in Latin-1 behind the
// cache's back and invalidates it by its path: the mount must then read
// the new bytes, not those it cached.
func TestInvalidateOfANameNotUTF8(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	const name = "caf\xe9"
	old := randomBytes(2<<20, 7)
	if err := os.WriteFile(filepath.Join(in.backing, name), old, 0o644); err != nil {
		t.Fatal(err)
	}
	up(t, in, 2)
	must(t, "local", "preload", "--mount", in.mount, filepath.Join(in.mount, name))
	sameFile(t, filepath.Join(in.mount, name), old)
	changed := randomBytes(2<<20, 8)
	if err := os.WriteFile(filepath.Join(in.backing, name), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "local", "invalidate", "--mount", in.mount, filepath.Join(in.mount, name))
	sameFile(t, filepath.Join(in.mount, name), changed)
}

// TestInstanceInDirectoriesNotUTF8 runs an instance whose backing
// directory, mount point and cache directory have Latin-1 names: status
// must find the mount, and after every process of it was killed, up must
// take the cache directory for the instance's own and write back what its
// servers held, as down must.
func TestInstanceInDirectoriesNotUTF8(t *testing.T) {
	requireFUSE(t)
	root := t.TempDir()
	in := instance{filepath.Join(root, "backing\xe9"), filepath.Join(root, "mnt\xe9"), filepath.Join(root, "cache\xe9")}
	for _, d := range []string{in.backing, in.mount} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	up(t, in, 2)
	data := randomBytes(3<<20, 9)
	writeThrough(t, in.mount, "caf\xe9", data)
	if out := must(t, "local", "status", "--mount", in.mount); !strings.Contains(out, in.mount+" (up)") {
		t.Errorf("status does not find the mount:\n%s", out)
	}
	st := readState(t, in.cacheDir)
	for _, pid := range []int{st.MountPID, st.Servers[0].PID, st.Servers[1].PID} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
	}
	forceUnmount(in.mount)
	must(t, upArgs(in, 2)...)
	sameFile(t, filepath.Join(in.mount, "caf\xe9"), data)
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "caf\xe9"), data)
}

// TestHiddenNamesOfALatin1DirectoryOutliveACrash unlinks a file while it is
// open in a directory named in Latin-1, then kills the mount and every
// server: the hidden name the file has in the backing directory must be
// gone after up and down, as the servers' records say it is theirs.
func TestHiddenNamesOfALatin1DirectoryOutliveACrash(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	dir := filepath.Join(in.mount, "caf\xe9")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "tmp"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(randomBytes(1<<20, 11)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "tmp")); err != nil {
		t.Fatal(err)
	}
	hidden := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(in.backing, "caf\xe9", ".burstcache-open-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := hidden(); len(got) != 1 {
		t.Fatalf("backing directory holds hidden names %q, want 1", got)
	}
	st := readState(t, in.cacheDir)
	for _, pid := range []int{st.MountPID, st.Servers[0].PID, st.Servers[1].PID} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
	}
	f.Close()
	forceUnmount(in.mount)
	must(t, upArgs(in, 2)...)
	must(t, "local", "down", "--mount", in.mount)
	if got := hidden(); len(got) != 0 {
		t.Errorf("hidden names left after down: %q", got)
	}
}

// TestDirectoriesOfAnyName runs instances whose cache directory, backing
// directory and mount point have names with the characters that lists and
// text formats split or quote on.
func TestDirectoriesOfAnyName(t *testing.T) {
	requireFUSE(t)
	for name, dir := range map[string]string{"comma": "a,b", "quote": `a"b`, "newline": "a\nb", "space and dash": " -a"} {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), dir)
			in := instance{filepath.Join(root, "backing"+dir), filepath.Join(root, "mnt"+dir), filepath.Join(root, "cache"+dir)}
			for _, d := range []string{in.backing, in.mount} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			up(t, in, 2)
			data := randomBytes(3<<20, 10)
			writeThrough(t, in.mount, "f", data)
			must(t, "local", "down", "--mount", in.mount)
			sameFile(t, filepath.Join(in.backing, "f"), data)
		})
	}
}

// writeThrough writes data to the file p under dir, making its parents.
func writeThrough(t *testing.T, dir, p string, data []byte) {
	t.Helper()
	full := filepath.Join(dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatalf("making the parents of %q: %v", p, err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		t.Fatalf("writing %q: %v", p, err)
	}
}

// filesUnder returns the regular files under root, hidden ones included, by
// their paths relative to it.
func filesUnder(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err == nil {
			files[rel], err = os.ReadFile(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
