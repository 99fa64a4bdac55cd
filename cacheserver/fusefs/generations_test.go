package fusefs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// reusedIno answers one inode number for every regular file, and, with
// gens, each backing file's own inode number as its generation (at opens
// and creations only, as the servers answer them): a file system that
// gives every new file the inode number of the last one removed. Without
// gens, as over NFS, only the change time tells the files apart.
type reusedIno struct {
	*posixns.FS
	gens bool
}

const theIno = 4242

func reuse(a namespace.Attr, gen bool) namespace.Attr {
	if a.IsRegular() {
		a.Birth, a.Gen = 0, 0
		if gen {
			a.Gen = uint32(a.Ino)
		}
		a.Ino = theIno
	}
	return a
}

func (r reusedIno) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	a, err := r.FS.GetAttr(ctx, p)
	return reuse(a, false), err
}

func (r reusedIno) GetAttrProbing(ctx context.Context, p string, names []string) (namespace.Attr, []error, error) {
	a, errs, err := r.FS.GetAttrProbing(ctx, p, names)
	return reuse(a, false), errs, err
}

func (r reusedIno) Open(ctx context.Context, p string, flags int) (namespace.Attr, error) {
	a, err := r.FS.Open(ctx, p, flags)
	return reuse(a, r.gens), err
}

func (r reusedIno) Create(ctx context.Context, p string, flags int, mode uint32) (namespace.Attr, error) {
	a, err := r.FS.Create(ctx, p, flags, mode)
	return reuse(a, r.gens), err
}

// TestClientCacheKeepsNothingOfAFileWhoseInodeNumberWasReused replaces a
// file behind a mount with the client cache, by one that has the removed
// file's inode number, and creates one so through the mount while a
// descriptor holds the removed one open: the kernel,
// which trusts the size it knows of an inode it holds and keeps its
// pages, must read and stat the new file once it trusts the name no
// more, not the removed one. With generations, and without, by the change
// time of the new file.
func TestClientCacheKeepsNothingOfAFileWhoseInodeNumberWasReused(t *testing.T) {
	for name, gens := range map[string]bool{"generations": true, "change times": false} {
		t.Run(name, func(t *testing.T) { clientCacheKeepsNothingOfReusedInode(t, gens) })
	}
}

func clientCacheKeepsNothingOfReusedInode(t *testing.T, gens bool) {
	opts := Options{ClientCache: true, EntryTimeout: time.Millisecond, AttrTimeout: time.Millisecond}
	mnt, backing, _, _ := mountOver(t, opts, func(p *posixns.FS) reusedIno { return reusedIno{p, gens} })
	const old, replaced = "the removed file", "the file that replaced it, longer"
	if err := os.WriteFile(filepath.Join(backing, "f"), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); string(got) != old {
		t.Fatalf("first read: %q, %v", got, err)
	}
	// ext4 keeps change times to a clock tick.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(backing, "f.new"), []byte(replaced), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(backing, "f.new"), filepath.Join(backing, "f")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); string(got) != replaced {
		t.Fatalf("read of the file that replaced it: %q, %v; want %q", got, err, replaced)
	}

	// Removed behind the mount while a descriptor holds it open, and made
	// again through the mount.
	held, err := os.Open(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := os.Remove(filepath.Join(backing, "f")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	const created = "made"
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte(created), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(mnt, "f")); err != nil || fi.Size() != int64(len(created)) {
		t.Fatalf("stat of the file made through the mount: %v, %v; want size %d", fi, err, len(created))
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); string(got) != created {
		t.Fatalf("read of the file made through the mount: %q, %v", got, err)
	}
}

// TestOpenOfANameRemovedBehindTheMount opens, through a mount with the
// client cache, whose kernel trusts names for an hour, a file removed
// behind the mount: an open that may create it makes it anew, one that
// may not fails with ENOENT, as on a file system the kernel asks.
func TestOpenOfANameRemovedBehindTheMount(t *testing.T) {
	mnt, backing, _ := mount(t, Options{ClientCache: true, EntryTimeout: time.Hour, AttrTimeout: time.Hour})
	for _, name := range []string{"created", "opened"} {
		if err := os.WriteFile(filepath.Join(backing, name), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(mnt, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(backing, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mnt, "created"), []byte("new"), 0o644); err != nil {
		t.Fatalf("creating a file removed behind the mount: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "created")); string(got) != "new" {
		t.Fatalf("backing file made through the mount: %q, %v", got, err)
	}
	if _, err := os.Open(filepath.Join(mnt, "opened")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("opening a file removed behind the mount: %v, want ENOENT", err)
	}
}

// TestClientCacheReadsAFileChangedInPlace changes a file in place behind a
// mount with the client cache (the same inode, written over as cp does):
// the kernel, which keeps the size and pages of the inode it holds, must
// read the new version once it trusts the name no more. A file written
// through the mount, whose change time its own writes move, keeps its
// node and pages.
func TestClientCacheReadsAFileChangedInPlace(t *testing.T) {
	opts := Options{ClientCache: true, EntryTimeout: time.Millisecond, AttrTimeout: time.Millisecond}
	mnt, backing, s := mount(t, opts)
	const old, changed = "version one", "the second version, longer"
	p := filepath.Join(backing, "f")
	if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); string(got) != old {
		t.Fatalf("first read: %q, %v", got, err)
	}
	var before, after syscall.Stat_t
	if err := syscall.Stat(p, &before); err != nil {
		t.Fatal(err)
	}
	for after.Ctim.Nano() <= before.Ctim.Nano() {
		// ext4 keeps times to a clock tick.
		time.Sleep(10 * time.Millisecond)
		if err := os.WriteFile(p, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(p, &after); err != nil {
			t.Fatal(err)
		}
	}
	if after.Ino != before.Ino {
		t.Fatalf("writing the file over made inode %d of %d", after.Ino, before.Ino)
	}
	time.Sleep(10 * time.Millisecond)
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); string(got) != changed {
		t.Fatalf("read of the file changed in place: %q, %v; want %q", got, err, changed)
	}
	// Cut and written through the mount, as cp over it does there.
	renewed := s.gens.renewals()
	time.Sleep(10 * time.Millisecond)
	const rewritten = "written over through the mount"
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte(rewritten), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); string(got) != rewritten {
		t.Fatalf("read of the file written over through the mount: %q, %v", got, err)
	}
	if n := s.gens.renewals() - renewed; n != 0 {
		t.Errorf("writing a file over through the mount renewed %d generations, want it kept", n)
	}

	g := filepath.Join(mnt, "g")
	if err := os.WriteFile(g, []byte("written "), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	w, err := os.OpenFile(g, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("through the mount"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	renewed = s.gens.renewals()
	time.Sleep(10 * time.Millisecond)
	if got, err := os.ReadFile(g); string(got) != "written through the mount" {
		t.Fatalf("read of the file written through the mount: %q, %v", got, err)
	}
	if n := s.gens.renewals() - renewed; n != 0 {
		t.Errorf("the open of a file written through the mount renewed %d generations, want it kept", n)
	}
}

// renewals returns how many generations g gave.
func (g *generations) renewals() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// TestAFileThatReplacedAnotherIsOpenedAtTheFirstRetry renames, behind a
// mount with the client cache, a file that the mount opened before and
// that was changed since over a name whose old file the kernel still
// trusts. The open of the name finds another file than the node it holds
// and answers ESTALE; the kernel looks the name up again and retries once,
// and that retry must open the file, not find the node of its earlier
// version, answer ESTALE again and fail the open: a reader on one node of
// a file that another node replaces so failed about one open in 170. The
// file may have been found under another name since it was opened, which
// answers the node that opened it.
func TestAFileThatReplacedAnotherIsOpenedAtTheFirstRetry(t *testing.T) {
	for _, alsoNamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("found under a second name: %v", alsoNamed), func(t *testing.T) {
			mnt, backing, _ := mount(t, Options{ClientCache: true, EntryTimeout: time.Minute})
			write := func(name, data string) syscall.Stat_t {
				t.Helper()
				if err := os.WriteFile(filepath.Join(backing, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
				var st syscall.Stat_t
				if err := syscall.Stat(filepath.Join(backing, name), &st); err != nil {
					t.Fatal(err)
				}
				return st
			}
			write("f", "f")
			write("g", "g")
			if alsoNamed {
				if err := os.Link(filepath.Join(backing, "g"), filepath.Join(backing, "h")); err != nil {
					t.Fatal(err)
				}
			}
			var before syscall.Stat_t
			if err := syscall.Stat(filepath.Join(backing, "g"), &before); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"f", "g"} {
				if got, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || string(got) != name {
					t.Fatalf("first read of %s: %q, %v", name, got, err)
				}
			}
			if alsoNamed {
				if _, err := os.Stat(filepath.Join(mnt, "h")); err != nil {
					t.Fatal(err)
				}
			}
			for after := before; after.Ctim.Nano() <= before.Ctim.Nano(); {
				// ext4 keeps times to a clock tick.
				time.Sleep(10 * time.Millisecond)
				after = write("g", "g, changed")
			}
			if err := os.Rename(filepath.Join(backing, "g"), filepath.Join(backing, "f")); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(got) != "g, changed" {
				t.Fatalf("read of f, replaced by the changed g: %q, %v", got, err)
			}
		})
	}
}

// TestAFileChangedBehindTheMountBeforeItsFirstOpenIsReadWhole looks a file
// up through a mount with the client cache, changes it behind the mount,
// and reads it: the kernel's inode of the file keeps the size of the
// lookup, and takes no other from the mount, so the read must reach a new
// inode, or it returns the first byte of the changed file alone.
func TestAFileChangedBehindTheMountBeforeItsFirstOpenIsReadWhole(t *testing.T) {
	mnt, backing, _ := mount(t, Options{ClientCache: true, EntryTimeout: time.Minute})
	name := filepath.Join(backing, "f")
	if err := os.WriteFile(name, []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	var before syscall.Stat_t
	if err := syscall.Stat(name, &before); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	for after := before; after.Ctim.Nano() <= before.Ctim.Nano(); {
		time.Sleep(10 * time.Millisecond)
		if err := os.WriteFile(name, []byte("f, changed"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(name, &after); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(got) != "f, changed" {
		t.Fatalf("read of a file changed behind the mount after its lookup: %q, %v", got, err)
	}
}
