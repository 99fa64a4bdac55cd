package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRenameWhileWriting renames, again and again to new names, a file
// that a process writes through a descriptor it keeps open, or the
// directory that holds it, as on a plain directory: every byte written must
// end up in the file under its last name, through the mount and in the
// backing directory after down, and no old name may come back. Writes sent
// under the path a rename had just moved from were cached there: the file
// had holes, and their write-back made the old names again. The kernel
// keeps a file's own rename apart from its direct writes, but not the
// rename of a directory above it, nor the write-back of cached pages.
func TestRenameWhileWriting(t *testing.T) {
	requireFUSE(t)
	for _, tc := range []struct {
		name  string
		dir   bool // rename the directory, not the file
		extra []string
	}{
		{name: "directory", dir: true},
		{name: "file with the client cache", extra: []string{"--client-cache"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 3, tc.extra...)
			name := func(i int) string { return fmt.Sprintf("n%d", i) }
			file := func(i int) string { return filepath.Join(name(i), "f") }
			renamed := name
			if !tc.dir {
				file = func(i int) string { return filepath.Join("d", name(i)) }
				renamed = file
			}
			if err := os.Mkdir(filepath.Join(in.mount, filepath.Dir(file(0))), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(filepath.Join(in.mount, file(0)), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			const block, blocks = 256 << 10, 96
			want := randomBytes(block*blocks, 11)
			var done atomic.Bool
			var renames atomic.Int32
			errc := make(chan error, 1)
			go func() {
				defer done.Store(true)
				// The same bytes, over and over until renames ran
				// between many of the writes.
				for pass := 0; pass < 20 && (pass == 0 || renames.Load() < 20); pass++ {
					for i := range blocks {
						if _, err := f.WriteAt(want[i*block:(i+1)*block], int64(i*block)); err != nil {
							errc <- err
							return
						}
						if i%8 == 7 {
							// Have the kernel write cached pages back
							// now, while renames go on.
							_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
						}
					}
				}
				errc <- nil
			}()
			cur := 0
			for !done.Load() {
				if err := os.Rename(filepath.Join(in.mount, renamed(cur)), filepath.Join(in.mount, renamed(cur+1))); err != nil {
					t.Errorf("rename of %s: %v", renamed(cur), err)
					break
				}
				cur++
				renames.Store(int32(cur))
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d renames", cur)
			if cur == 0 {
				t.Fatal("no rename ran while the file was written")
			}
			got, err := os.ReadFile(filepath.Join(in.mount, file(cur)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("through the mount: %d bytes (%v), want %d; first difference at %d", len(got), err, len(want), firstDifference(got, want))
			}
			must(t, "local", "down", "--mount", in.mount)
			sameFile(t, filepath.Join(in.backing, file(cur)), want)
			if tree := listTree(in.backing); tree != file(cur) {
				t.Errorf("the backing directory holds %s, want only %s", tree, file(cur))
			}
		})
	}
}

// listTree lists the files below dir, by their paths relative to it.
func listTree(dir string) string {
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	return strings.Join(files, " ")
}

// TestRenameOverAFileBeingPreloadedShowsTheNewFile renames new files over
// a file that preloads copy up again and again, from a process of their
// own as a job's preload or a hint does: right after each rename, the
// mount must read the renamed file, not bytes of the file it replaced that
// a preload copied up while the rename ran.
func TestRenameOverAFileBeingPreloadedShowsTheNewFile(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1)
	target := filepath.Join(in.mount, "x")
	var stop atomic.Bool
	preloads := make(chan struct{})
	go func() {
		defer close(preloads)
		for !stop.Load() {
			// It fails while the file is renamed away; it keeps going.
			_ = exec.Command(bin, "local", "preload", "--mount", in.mount, target).Run()
		}
	}()
	defer func() { stop.Store(true); <-preloads }()
	for v := range 60 {
		want := bytes.Repeat([]byte{byte(v + 1)}, 3<<20-v*4096)
		tmp := filepath.Join(in.mount, fmt.Sprintf("tmp%d", v%2))
		writeWhole(t, tmp, want)
		if err := os.Rename(tmp, target); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(target)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			i := firstDifference(got, want)
			t.Fatalf("after rename %d, %d bytes read, %d written; byte %d is %d, want %d", v, len(got), len(want), i, valueAt(got, i), v+1)
		}
	}
}

// valueAt returns b[i], or -1 past the end of b.
func valueAt(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	return int(b[i])
}

// readers open, read and close a file as fast as two goroutines can, until
// stopped, and check that each read one version of it whole (version), as
// on a local file system. They count the opens that answered ESTALE (the
// name changed between their lookup and their open twice in a row, and the
// kernel retries once), the opens that found no file, when that is allowed
// (missingOK), and the opens that read the file.
type readers struct {
	stop                 atomic.Bool
	stale, missing, read atomic.Int64
	errs                 chan error
}

func startReaders(p string, missingOK bool, version func(i int) []byte) *readers {
	r := &readers{errs: make(chan error, 2)}
	for range 2 {
		go func() { r.errs <- r.run(p, missingOK, version) }()
	}
	return r
}

func (r *readers) run(p string, missingOK bool, version func(i int) []byte) error {
	for !r.stop.Load() {
		f, err := os.Open(p)
		switch {
		case errors.Is(err, unix.ESTALE):
			r.stale.Add(1)
			continue
		case missingOK && errors.Is(err, os.ErrNotExist):
			r.missing.Add(1)
			continue
		case err != nil:
			return err
		}
		got, err := io.ReadAll(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		var i int
		if _, err := fmt.Sscanf(string(got), "version %d", &i); err != nil || !bytes.Equal(got, version(i)) {
			return fmt.Errorf("read %d bytes that are no version whole: %.40q", len(got), got)
		}
		r.read.Add(1)
	}
	return nil
}

// wait stops the readers and fails t with what they found.
func (r *readers) wait(t *testing.T) {
	t.Helper()
	r.stop.Store(true)
	for range 2 {
		if err := <-r.errs; err != nil {
			t.Error(err)
		}
	}
	t.Logf("opens that read the file: %d, found it missing: %d, answered ESTALE: %d", r.read.Load(), r.missing.Load(), r.stale.Load())
}

// versioned returns version i of a file; versions differ in length, so
// that a read of one version through the size of another shows.
func versioned(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("version %04d\n", i)), 100+i%5*50)
}

// TestReadersOfAFileReplacedAgainAndAgain replaces a file 200 times the way
// programs publish a new version (write a temporary file, rename it over),
// while readers on the same mount open, read and close it, with and
// without the client cache. Each must read one version or another, whole:
// opens that found the name missing, reads and closes of a replaced file
// that failed with EIO, reads of the replacement, were all seen.
func TestReadersOfAFileReplacedAgainAndAgain(t *testing.T) {
	requireFUSE(t)
	for name, extra := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 2, extra...)
			p := filepath.Join(in.mount, "cfg")
			if err := os.WriteFile(p, versioned(0), 0o644); err != nil {
				t.Fatal(err)
			}
			r := startReaders(p, false, versioned)
			for i := 1; i <= 200; i++ {
				if err := os.WriteFile(p+".tmp", versioned(i), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(p+".tmp", p); err != nil {
					t.Fatal(err)
				}
			}
			r.wait(t)
			must(t, "local", "down", "--mount", in.mount)
			sameFile(t, filepath.Join(in.backing, "cfg"), versioned(200))
		})
	}
}

// TestReadersOfAFileRemovedAgainAndAgain makes a file whole (by a rename)
// and removes it 200 times, as a spool of work items does, while readers
// on the same mount open, read and close it, with and without the client
// cache. Each must find the file missing, or read one version whole: an
// open that landed as the file was removed used to succeed, and its reads
// failed with EIO or read zeros.
func TestReadersOfAFileRemovedAgainAndAgain(t *testing.T) {
	requireFUSE(t)
	for name, extra := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 2, extra...)
			p := filepath.Join(in.mount, "item")
			r := startReaders(p, true, versioned)
			for i := 1; i <= 200; i++ {
				if err := os.WriteFile(p+".tmp", versioned(i), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(p+".tmp", p); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			r.wait(t)
			if r.read.Load() == 0 {
				t.Error("no open found the file: the readers did not race the removals")
			}
			must(t, "local", "down", "--mount", in.mount)
			if es, err := os.ReadDir(in.backing); err != nil || len(es) != 0 {
				t.Errorf("the backing directory holds %v, %v; want nothing", es, err)
			}
		})
	}
}
