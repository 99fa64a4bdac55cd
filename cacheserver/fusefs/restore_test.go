package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// crash is how crashingRenames fails the rename it was armed for.
type crash int

const (
	// crashBefore: the server went before it renamed (ECONNREFUSED).
	crashBefore crash = iota
	// crashAfter: the server renamed, and the answer got lost with the
	// connection (ECONNRESET).
	crashAfter
	// crashBeforeAndTaken: as crashBefore, and another mount then made
	// a file under the name the rename was to replace.
	crashBeforeAndTaken
	// crashHiding: the server gave the file that the rename replaces its
	// hidden name, and the answer got lost (ECONNRESET); the rename
	// itself then goes through.
	crashHiding
	// crashHidingAndStay: as crashHiding, and the server stays down for
	// as many renames as refusals says, whatever they rename.
	crashHidingAndStay
	// crashBeforeHidingAndStay: the server went before it hid the file
	// the rename replaces, and stays down as for crashHidingAndStay.
	crashBeforeHidingAndStay
)

// crashingRenames is a namespace whose next rename between names that are
// not hidden, once armed, fails as its crash says, and whose renames of
// hidden names back to their names then fail with ECONNREFUSED (the server
// is down) for as many tries as refusals says.
type crashingRenames struct {
	*posixns.FS
	backing string
	mu      sync.Mutex
	armed   bool
	crash   crash
	// refusals is how many tries to give a hidden file its name back
	// fail (with stay, renames of any names); refused counts them.
	refusals, refused int
	stay              bool
}

func (c *crashingRenames) arm(how crash, refusals int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.crash, c.refusals, c.refused, c.stay = true, how, refusals, 0, false
}

func (c *crashingRenames) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	hidden := func(p string) bool { return strings.HasPrefix(filepath.Base(p), hiddenPrefix) }
	c.mu.Lock()
	defer c.mu.Unlock()
	hiding := c.crash == crashHiding || c.crash == crashHidingAndStay || c.crash == crashBeforeHidingAndStay
	switch {
	case c.armed && hiding && hidden(newPath):
		c.armed = false
		c.stay = c.crash != crashHiding
		if c.crash == crashBeforeHidingAndStay {
			return fmt.Errorf("dialing cache server: %w", syscall.ECONNREFUSED)
		}
		if err := c.FS.Rename(ctx, oldPath, newPath, flags); err != nil {
			return err
		}
		return fmt.Errorf("connection to cache server lost: %w", syscall.ECONNRESET)
	case c.armed && !hiding && !hidden(oldPath) && !hidden(newPath):
		c.armed = false
		switch c.crash {
		case crashAfter:
			if err := c.FS.Rename(ctx, oldPath, newPath, flags); err != nil {
				return err
			}
			return fmt.Errorf("connection to cache server lost: %w", syscall.ECONNRESET)
		case crashBeforeAndTaken:
			if err := os.WriteFile(filepath.Join(c.backing, newPath), []byte("another mount's"), 0o644); err != nil {
				return err
			}
		}
		return fmt.Errorf("dialing cache server: %w", syscall.ECONNREFUSED)
	case (c.stay || hidden(oldPath)) && c.refused < c.refusals:
		c.refused++
		return fmt.Errorf("dialing cache server: %w", syscall.ECONNREFUSED)
	}
	return c.FS.Rename(ctx, oldPath, newPath, flags)
}

// mountCrashing mounts a crashingRenames over a fresh backing directory.
func mountCrashing(t *testing.T) (mnt, backing string, fsys *crashingRenames, s *Server) {
	t.Helper()
	mnt, backing, fsys, s = mountOver(t, Options{}, func(p *posixns.FS) *crashingRenames { return &crashingRenames{FS: p} })
	fsys.backing = backing
	return mnt, backing, fsys, s
}

// writeG writes "g" to the file g.
func writeG(t *testing.T, g string) {
	t.Helper()
	if err := os.WriteFile(g, []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shortRestoreWait has the mount give up waiting for a hidden file's name
// after a few tries, and try again in the background often.
func shortRestoreWait(t *testing.T) {
	wait, every := restoreWait, restoreEvery
	restoreWait, restoreEvery = 30*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { restoreWait, restoreEvery = wait, every })
}

// TestARenameThatFailsAfterHidingItsTargetLosesNothing renames g over f,
// which the mount hides first (because it is open, or because another
// thread just read it), and has the server fail the rename and then the
// first tries to give f its name back, as a server that crashed and is
// restarting does. f must get its name back, with its data, and neither
// its close nor its last release may remove it: a failed rename changes
// nothing. Each case failed before: f stayed under its hidden name, which
// the last release removed, its data with it.
func TestARenameThatFailsAfterHidingItsTargetLosesNothing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		open     bool
		refusals int
		short    bool
	}{
		{name: "open, server back at once", open: true, refusals: 0},
		{name: "open, server back after a few tries", open: true, refusals: 3},
		{name: "open, server back after the rename returned", open: true, refusals: 8, short: true},
		{name: "just read, server back after a few tries", refusals: 3},
		{name: "just read, server back after the rename returned", refusals: 8, short: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.short {
				shortRestoreWait(t)
			}
			mnt, backing, fsys, s := mountCrashing(t)
			f, g := filepath.Join(mnt, "f"), filepath.Join(mnt, "g")
			var held *os.File
			if tc.open {
				held = openWritten(t, f)
			} else {
				if err := os.WriteFile(f, []byte("f"), 0o644); err != nil {
					t.Fatal(err)
				}
				readOnThread(t, newThread(t), f)
				waitReleased(t, s, "f")
			}
			writeG(t, g)
			fsys.arm(crashBefore, tc.refusals)
			if err := os.Rename(g, f); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("renaming g over f while the server crashes: %v, want ECONNREFUSED", err)
			}
			if held != nil {
				buf := make([]byte, 2)
				if n, err := held.ReadAt(buf, 0); n != 1 || buf[0] != 'f' {
					t.Errorf("the open file reads %q, %v after the failed rename; want f", buf[:n], err)
				}
				held.Close()
			}
			want := map[string]string{"f": "f", "g": "g"}
			waitFiles(t, backing, want)
			for name, data := range want {
				if got, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || string(got) != data {
					t.Errorf("%s reads %q, %v through the mount; want %q", name, got, err, data)
				}
			}
		})
	}
}

// TestAnAnswerLostAfterTheServerActed renames g over f, which the mount
// has open and so hides first, and has the answer get lost with the
// connection after the server acted: to the rename (the rename took
// place, so it succeeds), or to the hiding (which took place, so the
// rename goes on). The open file's hidden name goes at its last close, as
// after any rename over an open file. Before, the rename failed although
// f now read g, or f stayed under its hidden name for good, its own name
// missing.
func TestAnAnswerLostAfterTheServerActed(t *testing.T) {
	for name, how := range map[string]crash{"rename": crashAfter, "hiding": crashHiding} {
		t.Run(name, func(t *testing.T) {
			mnt, backing, fsys, s := mountCrashing(t)
			f, g := filepath.Join(mnt, "f"), filepath.Join(mnt, "g")
			held := openWritten(t, f)
			writeG(t, g)
			fsys.arm(how, 0)
			if err := os.Rename(g, f); err != nil {
				t.Fatalf("renaming g over f, the answer to the %s lost after the server made it: %v", name, err)
			}
			buf := make([]byte, 2)
			if n, err := held.ReadAt(buf, 0); n != 1 || buf[0] != 'f' {
				t.Errorf("the open file reads %q, %v after the rename; want f", buf[:n], err)
			}
			held.Close()
			waitReleased(t, s, "f")
			waitFiles(t, backing, map[string]string{"f": "g"})
		})
	}
}

// TestAHidingThatGoesUnansweredLosesNothing renames g over f, which the
// mount has open and so hides first, and has the server go down during
// the hiding, after it hid f (the answer got lost) or before, and stay
// down past the time the rename waits: the rename fails, and once the
// server is back f must have its name back, with its data, rather than
// stay under a hidden name that the teardown would remove, its own name
// missing meanwhile.
func TestAHidingThatGoesUnansweredLosesNothing(t *testing.T) {
	for name, how := range map[string]crash{"after hiding": crashHidingAndStay, "before hiding": crashBeforeHidingAndStay} {
		t.Run(name, func(t *testing.T) {
			shortRestoreWait(t)
			mnt, backing := failRenameOverOpen(t, how, 8)
			want := map[string]string{"f": "f", "g": "g"}
			waitFiles(t, backing, want)
			// The mount finds out whether f moved once the server answers;
			// until then f is missing to it.
			for name, data := range want {
				var got []byte
				var err error
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					if got, err = os.ReadFile(filepath.Join(mnt, name)); err == nil && string(got) == data {
						break
					}
				}
				if err != nil || string(got) != data {
					t.Errorf("%s reads %q, %v through the mount; want %q", name, got, err, data)
				}
			}
		})
	}
}

// TestAFileWhoseNameWasTakenAfterAFailedRenameIsKept fails a rename of g
// over f, open and so hidden first, and has another mount make a new f
// meanwhile: f cannot have its name back, and must not be removed at its
// last close nor left under a hidden name, which nobody lists. It is kept
// beside f under a name that says so.
func TestAFileWhoseNameWasTakenAfterAFailedRenameIsKept(t *testing.T) {
	mnt, backing := failRenameOverOpen(t, crashBeforeAndTaken, 0)
	var names []string
	i := -1
	for deadline := time.Now().Add(10 * time.Second); i < 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		names = entryNames(t, backing)
		i = slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "f"+namespace.KeptInfix) })
	}
	if i < 0 {
		t.Fatalf("the backing directory holds %q; want f, g and f kept under another name", names)
	}
	waitFiles(t, backing, map[string]string{"f": "another mount's", "g": "g", names[i]: "f"})
	if got, err := os.ReadFile(filepath.Join(mnt, names[i])); err != nil || string(got) != "f" {
		t.Errorf("%s reads %q, %v through the mount; want f", names[i], got, err)
	}
}

// failRenameOverOpen mounts a crashingRenames, writes f and keeps it
// open, writes g, and renames g over f with the namespace armed with how
// and refusals: the rename must fail with ECONNREFUSED. It closes f and
// returns the mount point and the backing directory.
func failRenameOverOpen(t *testing.T, how crash, refusals int) (mnt, backing string) {
	t.Helper()
	mnt, backing, fsys, _ := mountCrashing(t)
	f, g := filepath.Join(mnt, "f"), filepath.Join(mnt, "g")
	held := openWritten(t, f)
	writeG(t, g)
	fsys.arm(how, refusals)
	if err := os.Rename(g, f); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("renaming g over f while the server is down: %v, want ECONNREFUSED", err)
	}
	held.Close()
	return mnt, backing
}

// waitFiles waits, up to 10 s, for dir to hold exactly the files of want,
// each with its data, and fails the test with what it holds otherwise.
func waitFiles(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	var got map[string]string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got = map[string]string{}
		for _, name := range entryNames(t, dir) {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			got[name] = string(b)
		}
		if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s holds %v; want %v", dir, got, want)
	}
}
