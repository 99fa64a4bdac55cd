package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// notingFS is a namespace that outlives the mount: it records the hidden
// names it is told and the renames it makes, and refuses notes when told.
type notingFS struct {
	namespace.FS
	mu     sync.Mutex
	calls  []string
	refuse syscall.Errno
}

func (n *notingFS) NoteHidden(_ context.Context, p string, why namespace.Hiding) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.refuse != 0 {
		return n.refuse
	}
	call := "note " + p
	if why.Name != "" {
		call += fmt.Sprintf(" for a rename of %s (%d) over %s", why.Source, why.SourceIno, why.Name)
	}
	n.calls = append(n.calls, call)
	return nil
}

var (
	_ HiddenNoter = (*notingFS)(nil)
	_ HiddenNoter = (*gatedNotes)(nil)
	_ HiddenNoter = refusingNotes{}
)

func (n *notingFS) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	n.mu.Lock()
	n.calls = append(n.calls, "rename "+oldPath+" "+newPath)
	n.mu.Unlock()
	return n.FS.Rename(ctx, oldPath, newPath, flags)
}

// TestHiddenNamesAreNotedFirst unlinks files that are open: the namespace
// hears of each hidden name before the file gets it, so that a mount that
// dies with the file open leaves a name that can be found. A note that
// fails fails the unlink, and the file keeps its name, but for a namespace
// that cannot keep notes (ENOSYS: a server older than the mount), which
// the unlink goes on without.
func TestHiddenNamesAreNotedFirst(t *testing.T) {
	mnt, backing, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *notingFS { return &notingFS{FS: p} })
	for _, name := range []string{"f", "g"} {
		if err := os.WriteFile(filepath.Join(mnt, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	fsys.mu.Lock()
	calls := append([]string(nil), fsys.calls...)
	fsys.mu.Unlock()
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "note "+hiddenPrefix) {
		t.Fatalf("unlinking an open file made the calls %q, want a note of a hidden name, then a rename", calls)
	}
	hidden := strings.TrimPrefix(calls[0], "note ")
	if calls[1] != "rename f "+hidden {
		t.Fatalf("after noting %s the mount called %q, want the rename of f to it", hidden, calls[1])
	}
	f.Close()

	fsys.mu.Lock()
	fsys.refuse = syscall.EIO
	fsys.mu.Unlock()
	g, err := os.Open(filepath.Join(mnt, "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := os.Remove(filepath.Join(mnt, "g")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("unlinking an open file whose hidden name cannot be noted: %v, want EIO", err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "g")); err != nil || string(got) != "g" {
		t.Fatalf("g after the refused unlink: %q, %v; want it under its name", got, err)
	}

	fsys.mu.Lock()
	fsys.refuse = syscall.ENOSYS
	fsys.mu.Unlock()
	if err := os.Remove(filepath.Join(mnt, "g")); err != nil {
		t.Fatalf("unlinking an open file over a namespace that keeps no notes: %v", err)
	}
	if got, err := g.ReadAt(make([]byte, 1), 0); got != 1 || err != nil {
		t.Fatalf("reading g after its unlink: %d, %v", got, err)
	}
}

// TestARenameOverAnOpenFileNotesWhatItReplaces renames a file over one
// that the mount has open: the namespace hears the hidden name with the
// file's name and the file renamed, by path and inode number, before the
// file gets the hidden name, so that a teardown after a mount that died
// before it could give the file its name back (the rename failed) can tell
// that the rename did not take place. Once the rename took place, the
// namespace hears the hidden name again, as that of a file unlinked: the
// renamed file may be moved back later, and the replaced one must not
// come back then.
func TestARenameOverAnOpenFileNotesWhatItReplaces(t *testing.T) {
	mnt, _, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *notingFS { return &notingFS{FS: p} })
	held := openWritten(t, filepath.Join(mnt, "f"))
	defer held.Close()
	if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mnt, "g"), &st); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	fsys.mu.Lock()
	calls := append([]string(nil), fsys.calls...)
	fsys.mu.Unlock()
	suffix := fmt.Sprintf(" for a rename of g (%d) over f", st.Ino)
	if len(calls) != 4 || !strings.HasPrefix(calls[0], "note "+hiddenPrefix) || !strings.HasSuffix(calls[0], suffix) {
		t.Fatalf("renaming over an open file made the calls %q, want a note%s, two renames and a note", calls, suffix)
	}
	hidden := strings.TrimSuffix(strings.TrimPrefix(calls[0], "note "), suffix)
	if want := []string{"rename f " + hidden, "rename g f", "note " + hidden}; !slices.Equal(calls[1:], want) {
		t.Fatalf("after the note the mount called %q, want %q", calls[1:], want)
	}
}

// gatedNotes is a namespace whose notes of hidden names wait at a gate.
type gatedNotes struct {
	namespace.FS
	entered, gate chan struct{}
}

func (g *gatedNotes) NoteHidden(context.Context, string, namespace.Hiding) error {
	g.entered <- struct{}{}
	<-g.gate
	return nil
}

// TestReleaseWhileHidingRemovesTheHiddenName closes the last descriptor of
// a file while an unlink, or a rename over it, is hiding it, and lets the
// hiding go on only once the mount has handled the release. The file is
// closed and gone: its hidden name must go too, not stay in the backing
// directory for good.
func TestReleaseWhileHidingRemovesTheHiddenName(t *testing.T) {
	for name, remove := range map[string]func(mnt string) error{
		"unlink": func(mnt string) error { return os.Remove(filepath.Join(mnt, "f")) },
		"rename over": func(mnt string) error {
			if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("g"), 0o644); err != nil {
				return err
			}
			return os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			mnt, backing, fsys, s := mountOver(t, Options{}, func(p *posixns.FS) *gatedNotes {
				return &gatedNotes{FS: p, entered: make(chan struct{}), gate: make(chan struct{})}
			})
			if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("f"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join(mnt, "f"))
			if err != nil {
				t.Fatal(err)
			}
			removed := make(chan error, 1)
			go func() { removed <- remove(mnt) }()
			<-fsys.entered
			c := s.root.GetChild("f").Operations().(*node)
			before := opens(c)
			f.Close()
			for deadline := time.Now().Add(10 * time.Second); opens(c) == before; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the mount did not handle the release of the closed descriptor")
				}
			}
			close(fsys.gate)
			if err := <-removed; err != nil {
				t.Fatal(err)
			}
			names := entryNames(t, backing)
			want := map[string][]string{"unlink": nil, "rename over": {"f"}}[name]
			if !slices.Equal(names, want) {
				t.Errorf("the backing directory holds %q after the file was closed and replaced; want %q", names, want)
			}
		})
	}
}

// opens returns how many opens of n the mount counts.
func opens(n *node) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.opens
}

// failingRenames is a namespace whose renames between names that are not
// hidden fail.
type failingRenames struct{ namespace.FS }

func (f failingRenames) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	hidden := func(p string) bool { return strings.HasPrefix(filepath.Base(p), hiddenPrefix) }
	if !hidden(oldPath) && !hidden(newPath) {
		return syscall.EIO
	}
	return f.FS.Rename(ctx, oldPath, newPath, flags)
}

// TestAFailedRenameOverAnOpenFileLeavesBothFiles renames a file over one
// that the mount has open, which it hides first, and fails the rename: the
// open file gets its name back, stays readable through its descriptor with
// its one link, and both files are there once it is closed.
func TestAFailedRenameOverAnOpenFileLeavesBothFiles(t *testing.T) {
	mnt, backing, _, _ := mountOver(t, Options{}, func(p *posixns.FS) failingRenames { return failingRenames{p} })
	f := openWritten(t, filepath.Join(mnt, "f"))
	if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("rename over the open file: %v, want EIO", err)
	}
	buf := make([]byte, 2)
	if n, err := f.ReadAt(buf, 0); n != 1 || buf[0] != 'f' {
		t.Errorf("the open file reads %q, %v after the failed rename; want f", buf[:n], err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 1 {
		t.Errorf("fstat of the open file: %d links, %v; want 1", st.Nlink, err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); string(got) != "f" {
		t.Errorf("f reads %q, %v after the failed rename; want f", got, err)
	}
	f.Close()
	names := entryNames(t, backing)
	if !slices.Equal(names, []string{"f", "g"}) {
		t.Errorf("the backing directory holds %q once the file is closed; want f and g", names)
	}
}

// TestRemovingATreeWithAnOpenFile removes a tree in which a process still
// has a file open, as a job's clean-up does while a process it started
// still runs: as on a local file system, the removal succeeds, and the
// file stays readable through its descriptor until its last close, which
// removes its hidden name. So does a rename of a directory over one whose
// only file is such a file. A directory holding a hidden name that is not
// of a file this mount has open (another mount's) is not empty.
func TestRemovingATreeWithAnOpenFile(t *testing.T) {
	mnt, backing, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *notingFS { return &notingFS{FS: p} })
	if err := os.MkdirAll(filepath.Join(mnt, "d/e"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := openWritten(t, filepath.Join(mnt, "d/e/f"))
	if err := os.RemoveAll(filepath.Join(mnt, "d")); err != nil {
		t.Fatalf("removing a tree with an open file: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(mnt, "d")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat of the removed tree: %v", err)
	}
	if got, err := f.ReadAt(make([]byte, 1), 0); got != 1 || err != nil {
		t.Fatalf("reading the open file of the removed tree: %d, %v", got, err)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Fatalf("the mount lists %v after the removal", entries)
	}
	entries, _ := os.ReadDir(backing)
	if len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), hiddenPrefix) {
		t.Fatalf("the backing directory holds %v while the file is open; want its hidden name", entries)
	}
	fsys.mu.Lock()
	noted := slices.Contains(fsys.calls, "note "+entries[0].Name())
	fsys.mu.Unlock()
	if !noted {
		t.Errorf("the hidden name %s was not noted before the file got it", entries[0].Name())
	}
	f.Close()
	waitEntries(t, backing, 0)

	for _, d := range []string{"new", "old"} {
		if err := os.Mkdir(filepath.Join(mnt, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	g := openWritten(t, filepath.Join(mnt, "old/f"))
	if err := os.Remove(filepath.Join(mnt, "old/f")); err != nil {
		t.Fatal(err)
	}
	// os.Rename refuses a directory over a directory whatever rename(2) does.
	if err := unix.Rename(filepath.Join(mnt, "new"), filepath.Join(mnt, "old")); err != nil {
		t.Fatalf("renaming a directory over one whose only file is open and unlinked: %v", err)
	}
	if got, err := g.ReadAt(make([]byte, 1), 0); got != 1 || err != nil {
		t.Fatalf("reading the open file of the replaced directory: %d, %v", got, err)
	}
	g.Close()
	waitEntries(t, backing, 1)

	if err := os.MkdirAll(filepath.Join(backing, "o"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backing, "o", hiddenPrefix+"other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Rmdir(filepath.Join(mnt, "o")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("removing a directory with another mount's hidden name: %v, want ENOTEMPTY", err)
	}
}

// openWritten writes "f" to a new file p and opens it; the test closes it.
func openWritten(t *testing.T, p string) *os.File {
	t.Helper()
	if err := os.WriteFile(p, []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// gatedUnlinks is a namespace whose removals of hidden names wait at a
// gate.
type gatedUnlinks struct {
	namespace.FS
	entered, gate chan struct{}
}

func (g *gatedUnlinks) Unlink(ctx context.Context, p string) error {
	if strings.HasPrefix(filepath.Base(p), hiddenPrefix) {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.FS.Unlink(ctx, p)
}

// TestAnOpenAfterTheLastReleaseOfAHiddenFileLooksTheNameUpAgain opens a
// file replaced while open, after its last release began to remove its
// hidden name, as the kernel does for a path walk that found the file
// before the rename: the open must not succeed on a file about to vanish
// (whose reads, fstat and close then fail with EIO), but answer ESTALE,
// which makes the kernel look the name up again.
func TestAnOpenAfterTheLastReleaseOfAHiddenFileLooksTheNameUpAgain(t *testing.T) {
	mnt, _, fsys, s := mountOver(t, Options{}, func(p *posixns.FS) *gatedUnlinks {
		return &gatedUnlinks{FS: p, entered: make(chan struct{}), gate: make(chan struct{})}
	})
	f := openWritten(t, filepath.Join(mnt, "f"))
	c := s.root.GetChild("f").Operations().(*node)
	if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	<-fsys.entered
	_, _, e := c.Open(context.Background(), syscall.O_RDONLY)
	close(fsys.gate)
	if e != syscall.ESTALE {
		t.Fatalf("an open of a replaced file after its last release: %v, want ESTALE", e)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(got) != "g" {
		t.Fatalf("f reads %q, %v; want g", got, err)
	}
}

// TestRemovingADirectoryRightAfterTheLastClose removes a directory while
// the last release of a file unlinked in it while open is still removing
// the file's hidden name, as a script that removes a tree right after the
// process that had the file open ended does: the kernel sends that release
// after the close has returned. The removal waits for it and succeeds.
func TestRemovingADirectoryRightAfterTheLastClose(t *testing.T) {
	mnt, _, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *gatedUnlinks {
		return &gatedUnlinks{FS: p, entered: make(chan struct{}), gate: make(chan struct{})}
	})
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := openWritten(t, filepath.Join(mnt, "d/f"))
	if err := os.Remove(filepath.Join(mnt, "d/f")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	<-fsys.entered
	removed := make(chan error, 1)
	go func() { removed <- unix.Rmdir(filepath.Join(mnt, "d")) }()
	time.Sleep(50 * time.Millisecond)
	close(fsys.gate)
	if err := <-removed; err != nil {
		t.Fatalf("removing the directory while the hidden name of its last file was being removed: %v", err)
	}
}

// entryNames lists the names in dir.
func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestAHiddenFileFoundAgainUnderItsOldNameKeepsToItsHiddenName replaces an
// open file by a rename and then puts the file back under its old name in
// go-fuse's tree, as a lookup does that found the file under that name
// just before the rename and came back after it. Writes through the open
// descriptor and the removal at its close must go to the hidden name, not
// to the old name, which names the replacement: that would write into the
// replacement and then remove it.
func TestAHiddenFileFoundAgainUnderItsOldNameKeepsToItsHiddenName(t *testing.T) {
	mnt, backing, s := mount(t, Options{})
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := s.root.GetChild("f")
	if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	s.root.AddChild("f", c, true)
	if _, err := f.WriteAt([]byte("F"), 0); err != nil {
		t.Fatalf("writing the replaced file: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("closing the replaced file: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || string(got) != "g" {
		t.Fatalf("the replacement reads %q, %v; want g", got, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		names := entryNames(t, backing)
		if slices.Equal(names, []string{"f"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backing directory holds %v after the last close; want [f]", names)
		}
	}
}

// gatedReads is a namespace whose reads, once armed, stop at a gate: the
// first one after it has taken its path.
type gatedReads struct {
	*posixns.FS
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedReads) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.gate
	}
	return g.FS.ReadAt(ctx, p, b, off)
}

// TestAReadOverlappingARenameOverItsFileReadsTheFile renames a file over
// one being read through the mount, after the read took the path of the
// file and before it reached the namespace, where the path names the new
// file by then: the read must return the bytes of the file it reads, as on
// a local file system, not those of the new one.
func TestAReadOverlappingARenameOverItsFileReadsTheFile(t *testing.T) {
	mnt, _, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *gatedReads {
		return &gatedReads{FS: p, entered: make(chan struct{}), gate: make(chan struct{})}
	})
	f := openWritten(t, filepath.Join(mnt, "f"))
	if err := os.WriteFile(filepath.Join(mnt, "g"), []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys.armed.Store(true)
	type result struct {
		b   []byte
		err error
	}
	read := make(chan result, 1)
	go func() {
		b := make([]byte, 16)
		n, err := f.ReadAt(b, 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		read <- result{b[:n], err}
	}()
	<-fsys.entered
	renamed := make(chan error, 1)
	go func() { renamed <- os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f")) }()
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	close(fsys.gate)
	if r := <-read; r.err != nil || string(r.b) != "f" {
		t.Fatalf("a read of f across a rename of g over it: %q, %v; want f", r.b, r.err)
	}
}

// TestAReadOfAFileGoneBehindTheMountFailsWithEIO removes, behind the
// mount, a file that the mount has open: a read through the descriptor
// fails with EIO, as the file's other calls do, never with ENOENT, which
// read(2) does not give.
func TestAReadOfAFileGoneBehindTheMountFailsWithEIO(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	f := openWritten(t, filepath.Join(mnt, "f"))
	if err := os.Remove(filepath.Join(backing, "f")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a read of a file removed behind the mount: %v; want EIO", err)
	}
}

// gatedRenames is a namespace whose renames of g stop at a gate.
type gatedRenames struct {
	*posixns.FS
	entered, gate chan struct{}
}

func (g *gatedRenames) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	if filepath.Base(oldPath) == "g" {
		close(g.entered)
		<-g.gate
	}
	return g.FS.Rename(ctx, oldPath, newPath, flags)
}

// TestAnOpenLandingDuringARenameOverItsFileOpensTheFile renames g over f,
// which a process read just before, and sends an open of f while the
// rename runs, as the kernel does for a path walk that found f before the
// rename: the open must open f, and reads through it read f, as on a local
// file system, where the open holds the file that the rename then unlinks.
// The rename removes f all the same: once the open is released, the
// directory holds g's bytes under f alone.
func TestAnOpenLandingDuringARenameOverItsFileOpensTheFile(t *testing.T) {
	mnt, backing, fsys, s := mountOver(t, Options{}, func(p *posixns.FS) *gatedRenames {
		return &gatedRenames{FS: p, entered: make(chan struct{}), gate: make(chan struct{})}
	})
	for _, name := range []string{"f", "g"} {
		if err := os.WriteFile(filepath.Join(mnt, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := readOnThread(t, newThread(t), filepath.Join(mnt, "f")); got != "f" {
		t.Fatalf("reading f: %q", got)
	}
	waitReleased(t, s, "f")
	c := s.root.GetChild("f").Operations().(*node)
	renamed := make(chan error, 1)
	go func() { renamed <- os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f")) }()
	<-fsys.entered
	h, _, e := c.Open(context.Background(), syscall.O_RDONLY)
	close(fsys.gate)
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	if e != 0 {
		t.Fatalf("an open of f during the rename of g over it: %v", e)
	}
	b := make([]byte, 16)
	r, e := c.Read(context.Background(), h, b, 0)
	if e != 0 {
		t.Fatalf("reading f opened during the rename: %v", e)
	}
	got, _ := r.Bytes(b)
	if string(got) != "f" {
		t.Fatalf("f opened during the rename reads %q; want f", got)
	}
	if e := c.Release(context.Background(), h); e != 0 {
		t.Fatalf("releasing f: %v", e)
	}
	if names := entryNames(t, backing); !slices.Equal(names, []string{"f"}) {
		t.Fatalf("the backing directory holds %v after the release; want [f]", names)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || string(got) != "g" {
		t.Fatalf("f reads %q, %v after the rename; want g", got, err)
	}
}

// refusingNotes is a namespace that cannot keep hidden names.
type refusingNotes struct{ *posixns.FS }

func (refusingNotes) NoteHidden(context.Context, string, namespace.Hiding) error { return syscall.EIO }

// TestARenameOverAFileJustReadGoesOnWhenItCannotHideTheFile renames a file
// over one read just before through a namespace that refuses to keep the
// hidden name: hiding the file from opens that may be on their way is a
// precaution, and the rename must not fail for it.
func TestARenameOverAFileJustReadGoesOnWhenItCannotHideTheFile(t *testing.T) {
	mnt, _, _, s := mountOver(t, Options{}, func(p *posixns.FS) refusingNotes { return refusingNotes{p} })
	for _, name := range []string{"f", "g"} {
		if err := os.WriteFile(filepath.Join(mnt, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	readOnThread(t, newThread(t), filepath.Join(mnt, "f"))
	// The hiding of a file still open is no precaution.
	waitReleased(t, s, "f")
	if err := os.Rename(filepath.Join(mnt, "g"), filepath.Join(mnt, "f")); err != nil {
		t.Fatalf("renaming g over f, read just before: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(got) != "g" {
		t.Fatalf("f reads %q, %v; want g", got, err)
	}
}
