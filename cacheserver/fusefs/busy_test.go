package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// thread runs functions on an OS thread of its own, which no other
// goroutine runs on: the kernel tells the mount which thread each call
// comes from.
type thread struct{ do chan func() }

func newThread(t *testing.T) *thread {
	th := &thread{do: make(chan func())}
	go func() {
		// Never unlocked: the thread ends with the goroutine.
		runtime.LockOSThread()
		for f := range th.do {
			f()
		}
	}()
	t.Cleanup(func() { close(th.do) })
	return th
}

func (th *thread) run(f func()) {
	done := make(chan struct{})
	th.do <- func() {
		defer close(done)
		f()
	}
	<-done
}

// readOnThread reads the file p on th.
func readOnThread(t *testing.T, th *thread, p string) string {
	t.Helper()
	var got []byte
	var err error
	th.run(func() { got, err = os.ReadFile(p) })
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

// countedHidings is a namespace that counts the renames to hidden names.
type countedHidings struct {
	*posixns.FS
	hidings atomic.Int32
}

func (c *countedHidings) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	if strings.HasPrefix(filepath.Base(newPath), hiddenPrefix) {
		c.hidings.Add(1)
	}
	return c.FS.Rename(ctx, oldPath, newPath, flags)
}

// TestARenameHidesAFileOnlyWhenAnotherThreadUsedIt renames over files
// that the renaming thread alone used, which no open can be on its way to,
// and over files that another thread read just before: only the latter are
// hidden (each hiding costs three calls to the servers), unless the mount
// has the client cache, whose walks may find a name without a lookup of
// their own.
func TestARenameHidesAFileOnlyWhenAnotherThreadUsedIt(t *testing.T) {
	for _, clientCache := range []bool{false, true} {
		t.Run(fmt.Sprintf("client cache %v", clientCache), func(t *testing.T) {
			mnt, _, fsys, s := mountOver(t, Options{ClientCache: clientCache}, func(p *posixns.FS) *countedHidings {
				return &countedHidings{FS: p}
			})
			f, g := filepath.Join(mnt, "f"), filepath.Join(mnt, "g")
			self, other := newThread(t), newThread(t)
			for _, usedByOther := range []bool{false, true} {
				var err error
				self.run(func() {
					for _, name := range []string{f, g} {
						if err = os.WriteFile(name, []byte(filepath.Base(name)), 0o644); err != nil {
							return
						}
					}
					_, err = os.ReadFile(f)
				})
				if err != nil {
					t.Fatal(err)
				}
				if usedByOther {
					readOnThread(t, other, f)
				}
				// A file still open is hidden, whoever opened it.
				waitReleased(t, s, "f", "g")
				before := fsys.hidings.Load()
				self.run(func() { err = os.Rename(g, f) })
				if err != nil {
					t.Fatalf("renaming g over f: %v", err)
				}
				hidden := fsys.hidings.Load() > before
				if want := usedByOther || clientCache; hidden != want {
					t.Errorf("a rename over f used by another thread %v: hidden %v; want %v", usedByOther, hidden, want)
				}
			}
		})
	}
}

// gatedRemovals is a namespace whose first unlink of f, rename of f or
// rename over f, once armed, stops at a gate.
type gatedRemovals struct {
	*posixns.FS
	armed         atomic.Bool
	entered, gate chan struct{}
}

func (g *gatedRemovals) hold(p string) {
	if filepath.Base(p) == "f" && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.gate
	}
}

func (g *gatedRemovals) Unlink(ctx context.Context, p string) error {
	g.hold(p)
	return g.FS.Unlink(ctx, p)
}

func (g *gatedRemovals) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	if filepath.Base(oldPath) == "f" {
		g.hold(oldPath)
	} else {
		g.hold(newPath)
	}
	return g.FS.Rename(ctx, oldPath, newPath, flags)
}

// openDuring sends an open of c, as the kernel does for a path walk that
// found the file before a removal held at fsys's gate, lets the removal
// go on, and returns what the open answered once both are done.
func openDuring(t *testing.T, c *node, fsys *gatedRemovals, removal func() error) syscall.Errno {
	t.Helper()
	fsys.armed.Store(true)
	removed := make(chan error, 1)
	go func() { removed <- removal() }()
	<-fsys.entered
	opened := make(chan syscall.Errno, 1)
	go func() {
		h, _, e := c.Open(context.Background(), syscall.O_RDONLY)
		if e == 0 {
			c.Release(context.Background(), h)
		}
		opened <- e
	}()
	// The open waits for the removal; one that does not comes back first,
	// in a moment, and must not have succeeded. The wait only gives it that
	// moment: an open that comes later must answer the same.
	select {
	case e := <-opened:
		close(fsys.gate)
		<-removed
		return e
	case <-time.After(200 * time.Millisecond):
	}
	close(fsys.gate)
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	return <-opened
}

// TestAnOpenLandingDuringARemovalLooksTheNameUpAgain sends an open of f
// while an unlink of f, or a rename over f that does not hide it (f was
// used by the renaming thread alone), runs, as the kernel does for a path
// walk that found f before: the open must not succeed on the file about to
// go, whose reads would fail, but wait and answer ESTALE, so that the
// kernel looks the name up again and finds it gone, or standing for g.
func TestAnOpenLandingDuringARemovalLooksTheNameUpAgain(t *testing.T) {
	for _, op := range []string{"unlink", "rename"} {
		t.Run(op, func(t *testing.T) {
			mnt, backing, fsys, s := mountOver(t, Options{}, func(p *posixns.FS) *gatedRemovals {
				return &gatedRemovals{FS: p, entered: make(chan struct{}), gate: make(chan struct{})}
			})
			f, g := filepath.Join(mnt, "f"), filepath.Join(mnt, "g")
			th := newThread(t)
			var err error
			th.run(func() {
				if err = os.WriteFile(f, []byte("f"), 0o644); err == nil {
					err = os.WriteFile(g, []byte("g"), 0o644)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			waitReleased(t, s, "f", "g")
			c := s.root.GetChild("f").Operations().(*node)
			e := openDuring(t, c, fsys, func() (err error) {
				th.run(func() {
					if op == "unlink" {
						err = os.Remove(f)
					} else {
						err = os.Rename(g, f)
					}
				})
				return err
			})
			if e != syscall.ESTALE {
				t.Fatalf("an open of f during its %s: %v; want ESTALE", op, e)
			}
			want := map[string][]string{"unlink": {"g"}, "rename": {"f"}}[op]
			if names := entryNames(t, backing); !slices.Equal(names, want) {
				t.Fatalf("the backing directory holds %v; want %v", names, want)
			}
		})
	}
}
