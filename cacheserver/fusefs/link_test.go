package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// swappingLinks is a namespace that counts the reads of links, and, when
// told, puts another file in the place of the file that a lookup found,
// right after the lookup, as a rename by another client would: a regular
// file, or with toLink a link to "a".
type swappingLinks struct {
	*posixns.FS
	backing string
	mu      sync.Mutex
	swap    string
	toLink  bool
	reads   int
}

func (s *swappingLinks) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	a, err := s.FS.GetAttr(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.swap == "" || p != s.swap {
		return a, err
	}
	s.swap = ""
	tmp := filepath.Join(s.backing, "tmp")
	if s.toLink {
		err = os.Symlink("a", tmp)
	} else {
		err = os.WriteFile(tmp, []byte("file"), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.backing, p))
	}
	return a, err
}

func (s *swappingLinks) Readlink(ctx context.Context, p string) (string, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.FS.Readlink(ctx, p)
}

func (s *swappingLinks) ReadlinkAttr(ctx context.Context, p string) (string, namespace.Attr, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.FS.ReadlinkAttr(ctx, p)
}

// mountLinks mounts a swappingLinks namespace whose backing directory holds
// a file a and a link l to it.
func mountLinks(t *testing.T) (string, *swappingLinks) {
	t.Helper()
	mnt, backing, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *swappingLinks { return &swappingLinks{FS: p} })
	fsys.backing = backing
	if err := os.WriteFile(filepath.Join(backing, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(backing, "l")); err != nil {
		t.Fatal(err)
	}
	return mnt, fsys
}

func (s *swappingLinks) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// TestLinksAreReadOnce walks a symbolic link again and again: the mount
// reads it from the namespace once, when it looks it up, and answers the
// kernel's reads itself.
func TestLinksAreReadOnce(t *testing.T) {
	mnt, fsys := mountLinks(t)
	for range 5 {
		if got, err := os.ReadFile(filepath.Join(mnt, "l")); err != nil || string(got) != "a" {
			t.Fatalf("reading through the link: %q, %v", got, err)
		}
		if got, err := os.Readlink(filepath.Join(mnt, "l")); err != nil || got != "a" {
			t.Fatalf("readlink: %q, %v", got, err)
		}
	}
	if n := fsys.readCount(); n != 1 {
		t.Errorf("ten walks through a link read it %d times from the namespace; want 1", n)
	}
	before := fsys.readCount()
	if err := os.Symlink("made", filepath.Join(mnt, "m")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(mnt, "m")); err != nil || got != "made" {
		t.Fatalf("readlink of a link made through the mount: %q, %v", got, err)
	}
	if n := fsys.readCount() - before; n != 0 {
		t.Errorf("a link made through the mount was read from the namespace %d times; want none", n)
	}
}

// TestALinkReplacedAfterItsLookupIsNotMisread puts a file in the place of
// a link between the lookup that finds the link and the reads that follow.
// Opening the path must open the link's target or the new file, as on a
// local file system, where the rename is atomic: reading the path again
// and finding no link must not fail the open with EINVAL.
func TestALinkReplacedAfterItsLookupIsNotMisread(t *testing.T) {
	mnt, fsys := mountLinks(t)
	fsys.mu.Lock()
	fsys.swap = "l"
	fsys.mu.Unlock()
	got, err := os.ReadFile(filepath.Join(mnt, "l"))
	if err != nil || string(got) != "a" && string(got) != "file" {
		t.Fatalf("opening a link replaced by a file right after its lookup: %q, %v; want a or file", got, err)
	}
}

// TestAFileReplacedByALinkAfterItsLookupIsNotMisread puts a link in the
// place of a regular file between the lookup that finds the file and its
// open: the open must open the file or what the link names, as on a local
// file system, not fail with ELOOP.
func TestAFileReplacedByALinkAfterItsLookupIsNotMisread(t *testing.T) {
	mnt, fsys := mountLinks(t)
	if err := os.WriteFile(filepath.Join(fsys.backing, "f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys.mu.Lock()
	fsys.swap, fsys.toLink = "f", true
	fsys.mu.Unlock()
	got, err := os.ReadFile(filepath.Join(mnt, "f"))
	if err != nil || string(got) != "a" && string(got) != "f" {
		t.Fatalf("opening a file replaced by a link right after its lookup: %q, %v; want a or f", got, err)
	}
}

// TestALinkUnderTheNumberOfAnotherIsReadAfresh replaces, behind the mount,
// a link that the mount read by another link that gets its inode number
// (ext4 hands a freed number out again at once), under another name, while
// the kernel still holds the old link: the lookup of the new name answers
// the node of the old link, and reading the new link must give its own
// target, not the old one's.
func TestALinkUnderTheNumberOfAnotherIsReadAfresh(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	old := filepath.Join(backing, "old")
	if err := os.Symlink("first/target", old); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(mnt, "old")); err != nil || got != "first/target" {
		t.Fatalf("readlink of the first link: %q, %v", got, err)
	}
	var was syscall.Stat_t
	if err := syscall.Lstat(old, &was); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(backing, "new")
	if err := os.Symlink("second", made); err != nil {
		t.Fatal(err)
	}
	var is syscall.Stat_t
	if err := syscall.Lstat(made, &is); err != nil {
		t.Fatal(err)
	}
	if is.Ino != was.Ino {
		t.Skipf("the backing file system gave the new link inode number %d, not the freed %d", is.Ino, was.Ino)
	}
	if got, err := os.Readlink(filepath.Join(mnt, "new")); err != nil || got != "second" {
		t.Fatalf("readlink of a link under the inode number of a link read before: %q, %v; want second", got, err)
	}
}

// loopingDirs is a namespace whose directory d/e answers as d itself, as a
// bind mount of d on d/e seen through a server that crosses mount points
// would.
type loopingDirs struct{ *posixns.FS }

func (l loopingDirs) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	if p == "d/e" {
		p = "d"
	}
	return l.FS.GetAttr(ctx, p)
}

// TestADirectoryNumberedAsOneAboveIsNotServed looks up a directory with the
// inode number of its parent: served, it would make a loop of the mount's
// tree, whose paths would then grow without end. It fails with EXDEV, as a
// mount point does, and its parent is still served.
func TestADirectoryNumberedAsOneAboveIsNotServed(t *testing.T) {
	mnt, backing, _, _ := mountOver(t, Options{}, func(p *posixns.FS) loopingDirs { return loopingDirs{p} })
	if err := os.MkdirAll(filepath.Join(backing, "d/e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "d/e")); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("stat of a directory numbered as its parent: %v, want EXDEV", err)
	}
	done := make(chan error, 1)
	go func() {
		if err := os.WriteFile(filepath.Join(mnt, "d/f"), []byte("f"), 0o644); err != nil {
			done <- err
			return
		}
		_, err := os.ReadDir(filepath.Join(mnt, "d"))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("writing a file in the parent and listing it: %v", err)
		}
	case <-time.After(10 * time.Second):
		// The mount is lost: the cleanup detaches it.
		t.Fatal("writing a file in the parent did not end in 10 s")
	}
}
