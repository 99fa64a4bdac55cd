package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
)

// TestHiddenNamesLeftByDeadMountsAreRemoved hides two files as a mount does
// when they are unlinked while open: it notes each hidden name, then
// renames the file to it. One mount removes its hidden name at the last
// close, which takes the record along; the other dies first. The record of
// its name outlives a restart of the server, and a line torn by a crash
// after it. The teardown's RemoveHidden removes the name as the user that
// hid the file: while that user may not remove names in the directory, the
// name and its record stay, and the error says so. The directory has a
// Latin-1 name, which is no UTF-8: the record must name it byte for byte.
func TestHiddenNamesLeftByDeadMountsAreRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	backingDir, stateDir := t.TempDir(), t.TempDir()
	const uid, gid = 2000, 2000
	const d = "caf\xe9"
	dir := filepath.Join(backingDir, d)
	for _, d := range []string{filepath.Dir(backingDir), backingDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, backingDir, servertest.Options{Servers: 2, ExtentSize: 4096, ActAsCaller: true, StateDir: stateDir})
	f, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := ident.NewContext(context.Background(), ident.Cred{UID: uid, GID: gid})
	for _, name := range []string{"left", "closed", "kept"} {
		if _, err := f.Create(ctx, d+"/"+name, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, d+"/"+name, []byte("data of "+name), 0); err != nil {
			t.Fatal(err)
		}
		if name == "kept" {
			continue
		}
		hidden := d + "/.burstcache-open-" + name
		if err := f.NoteHidden(ctx, hidden, namespace.Hiding{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Rename(ctx, d+"/"+name, hidden, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Unlink(ctx, d+"/.burstcache-open-closed"); err != nil {
		t.Fatal(err)
	}
	recorded := func() (total int64, holder int) {
		t.Helper()
		for i, s := range in.Servers {
			st, err := s.Stats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.HiddenNames > 0 {
				holder = i
			}
			total += st.HiddenNames
		}
		return total, holder
	}
	total, holder := recorded()
	if total != 1 {
		t.Fatalf("servers record %d hidden names, want 1: the one whose mount did not remove it", total)
	}
	log := filepath.Join(stateDir, fmt.Sprintf("server-%d-%s", holder, server.HiddenNamesFile))
	lf, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lf.WriteString(`{"path":"d/.burstcache-open-torn","ui`); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	in.Restart(t, holder)
	if total, _ := recorded(); total != 1 {
		t.Fatalf("after a restart the servers record %d hidden names, want 1", total)
	}

	hiddenFile := filepath.Join(dir, ".burstcache-open-left")
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	res, err := in.Servers[holder].RemoveHidden(context.Background())
	if res.Removed != 0 || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("RemoveHidden in a directory the user may not change = %+v, %v; want 0 and EACCES", res, err)
	}
	if _, err := os.Stat(hiddenFile); err != nil {
		t.Fatalf("the hidden name is gone after a refused removal: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range in.Servers {
		res, err := s.RemoveHidden(context.Background())
		if err != nil || res.Removed != map[bool]int{true: 1}[i == holder] || res.GivenBack != nil {
			t.Fatalf("RemoveHidden on server %d = %+v, %v", i, res, err)
		}
	}
	if _, err := os.Stat(hiddenFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hidden name left by a dead mount is still there: %v", err)
	}
	if total, _ := recorded(); total != 0 {
		t.Fatalf("servers still record %d hidden names", total)
	}
	if _, err := os.Stat(filepath.Join(dir, "kept")); err != nil {
		t.Fatalf("a file nobody hid went with the hidden names: %v", err)
	}
}

// TestAFileHiddenForAFailedRenameGetsItsNameBackAtTeardown hides files as
// a mount does before a rename over them, and has the mount end without
// removing the hidden names or giving them back. At the teardown, a file
// whose rename did not take place (the file to be renamed is still at its
// path) gets its name back with its data, or a name beside it if another
// file took the name meanwhile. One whose rename took place is removed,
// also when its name was removed after the rename, or a file made where
// the renamed file was, or the renamed file moved back there once the
// mount noted the name again: it must not come back.
func TestAFileHiddenForAFailedRenameGetsItsNameBackAtTeardown(t *testing.T) {
	backingDir := t.TempDir()
	in := servertest.Start(t, backingDir, servertest.Options{Servers: 2, ExtentSize: 4096})
	f, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	write := func(name string) namespace.Attr {
		t.Helper()
		if _, err := f.Create(ctx, name, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, name, []byte("data of "+name), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Flush(ctx, name); err != nil {
			t.Fatal(err)
		}
		a, err := f.GetAttr(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// hide hides name to make way for a rename of source over it.
	hide := func(name, source string) {
		t.Helper()
		write(name)
		a := write(source)
		why := namespace.Hiding{Name: name, Source: source, SourceIno: a.Ino}
		if err := f.NoteHidden(ctx, ".burstcache-open-"+name, why); err != nil {
			t.Fatal(err)
		}
		if err := f.Rename(ctx, name, ".burstcache-open-"+name, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.NoteHidden(ctx, ".burstcache-open-x", namespace.Hiding{Name: "elsewhere/x", Source: "y", SourceIno: 1}); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("noting a hidden name for a file of another directory: %v, want EINVAL", err)
	}
	hide("failed", "failed-source")
	hide("taken", "taken-source")
	write("taken")
	hide("replaced", "replaced-source")
	if err := f.Rename(ctx, "replaced-source", "replaced", 0); err != nil {
		t.Fatal(err)
	}
	hide("removed", "removed-source")
	if err := f.Rename(ctx, "removed-source", "removed", 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Unlink(ctx, "removed"); err != nil {
		t.Fatal(err)
	}
	// A mount notes the name of a replaced file that stays open again,
	// as of a file unlinked: the renamed file may move back.
	hide("back", "back-source")
	if err := f.Rename(ctx, "back-source", "back", 0); err != nil {
		t.Fatal(err)
	}
	if err := f.NoteHidden(ctx, ".burstcache-open-back", namespace.Hiding{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename(ctx, "back", "back-source", 0); err != nil {
		t.Fatal(err)
	}
	hide("reused", "reused-source")
	if err := f.Rename(ctx, "reused-source", "reused", 0); err != nil {
		t.Fatal(err)
	}
	write("reused-source")
	if err := f.Unlink(ctx, "reused"); err != nil {
		t.Fatal(err)
	}
	for _, s := range in.Servers {
		if left, err := s.Flush(ctx); err != nil || left != 0 {
			t.Fatalf("write-back: %d bytes left, %v", left, err)
		}
	}
	removed := 0
	givenBack := map[string]string{}
	for _, s := range in.Servers {
		res, err := s.RemoveHidden(ctx)
		if err != nil {
			t.Fatal(err)
		}
		removed += res.Removed
		for _, b := range res.GivenBack {
			givenBack[string(b.Path)] = string(b.As)
		}
	}
	if removed != 6 {
		t.Errorf("RemoveHidden took %d hidden names away, want 6", removed)
	}
	entries, err := os.ReadDir(backingDir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(backingDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := e.Name()
		if strings.HasPrefix(name, "taken"+namespace.KeptInfix) {
			name = "taken (kept)"
		}
		got[name] = string(data)
	}
	want := map[string]string{
		"failed":        "data of failed",
		"failed-source": "data of failed-source",
		"taken":         "data of taken",
		"taken (kept)":  "data of taken",
		"taken-source":  "data of taken-source",
		"replaced":      "data of replaced-source",
		"back-source":   "data of back-source",
		"reused-source": "data of reused-source",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the backing directory after the teardown (-want +got):\n%s", diff)
	}
	if len(givenBack) != 2 || givenBack["failed"] != "failed" || !strings.HasPrefix(givenBack["taken"], "taken"+namespace.KeptInfix) {
		t.Errorf("RemoveHidden says it gave back %v; want failed as itself and taken beside its name", givenBack)
	}
}

// TestATeardownTellsAFileFromOneUnderItsReusedInodeNumber hides f for a
// rename of s over it; the rename takes place, f's hidden name stays (its
// mount died), and the moved file is removed, after which a new file at s
// takes its inode number, as file systems give freed numbers out again at
// once. The teardown must take the new s for another file, by its creation
// time, and remove f rather than bring it back, and give g, whose rename
// failed, its name back. Over a namespace that cannot tell creation times
// both are kept beside their names: the teardown cannot tell one from the
// other, and a file must neither be lost nor take the name of one removed.
func TestATeardownTellsAFileFromOneUnderItsReusedInodeNumber(t *testing.T) {
	for name, wrap := range map[string]func(namespace.FS) namespace.FS{
		"creation times":    nil,
		"no creation times": func(ns namespace.FS) namespace.FS { return struct{ namespace.FS }{ns} },
	} {
		t.Run(name, func(t *testing.T) {
			backingDir := t.TempDir()
			in := servertest.Start(t, backingDir, servertest.Options{Servers: 1, ExtentSize: 4096, WrapNS: wrap})
			f, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ctx := context.Background()
			for _, p := range []string{"f", "s", "g", "t"} {
				if err := os.WriteFile(filepath.Join(backingDir, p), []byte("data of "+p), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ino := func(p string) uint64 {
				t.Helper()
				a, err := f.GetAttr(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				return a.Ino
			}
			hide := func(name, source string) {
				t.Helper()
				why := namespace.Hiding{Name: name, Source: source, SourceIno: ino(source)}
				if err := f.NoteHidden(ctx, ".burstcache-open-"+name, why); err != nil {
					t.Fatal(err)
				}
				if err := f.Rename(ctx, name, ".burstcache-open-"+name, 0); err != nil {
					t.Fatal(err)
				}
			}
			// f: replaced, then the moved file removed, and its number
			// given to a new s.
			hide("f", "s")
			old := ino("s")
			if err := f.Rename(ctx, "s", "f", 0); err != nil {
				t.Fatal(err)
			}
			if err := f.Unlink(ctx, "f"); err != nil {
				t.Fatal(err)
			}
			reused := false
			for i := 0; i < 10000 && !reused; i++ {
				p := filepath.Join(backingDir, fmt.Sprintf("new%d", i))
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				var st syscall.Stat_t
				if err := syscall.Stat(p, &st); err != nil {
					t.Fatal(err)
				}
				if reused = st.Ino == old; reused {
					if err := os.Rename(p, filepath.Join(backingDir, "s")); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			if !reused {
				t.Fatalf("no new file took inode number %d in 10000 tries", old)
			}
			// g: the rename of t over it failed.
			hide("g", "t")
			res, err := in.Servers[0].RemoveHidden(ctx)
			if err != nil {
				t.Fatal(err)
			}
			names := entryNames(t, backingDir)
			keptF := slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "f"+namespace.KeptInfix) })
			if slices.Contains(names, "f") || wrap == nil && keptF {
				t.Errorf("the file replaced by a rename came back: the backing directory holds %q", names)
			}
			back := map[string]string{}
			for _, b := range res.GivenBack {
				back[string(b.Path)] = string(b.As)
			}
			wantG, wantBack := "g", 1
			if wrap != nil {
				// Kept beside their names, both: nothing tells them apart.
				wantG, wantBack = "g"+namespace.KeptInfix, 2
				if !keptF {
					t.Errorf("without creation times the file hidden for the rename that took place is gone: the backing directory holds %q", names)
				}
			}
			if len(back) != wantBack || !strings.HasPrefix(back["g"], wantG) {
				t.Fatalf("RemoveHidden gave back %+v; want %d files, g as %s...", res.GivenBack, wantBack, wantG)
			}
			if got, err := os.ReadFile(filepath.Join(backingDir, back["g"])); err != nil || string(got) != "data of g" {
				t.Errorf("%s reads %q, %v; want the data of g", back["g"], got, err)
			}
		})
	}
}

// entryNames lists dir.
func entryNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
