package integration

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRenameKeepsModificationTime renames files whose data is still dirty
// in the cache. The rename writes the data back first; the backing files
// must still end with the modification time the job gave them, the time of
// its last write or of an explicit utimens, as if it had used the backing
// file system directly.
func TestRenameKeepsModificationTime(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 3)
	data := randomBytes(3<<20, 7)
	for _, name := range []string{"written", "touched"} {
		if err := os.WriteFile(filepath.Join(in.mount, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wrote := time.Now()
	explicit := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(in.mount, "touched"), explicit, explicit); err != nil {
		t.Fatal(err)
	}
	seen := mtimeOf(t, filepath.Join(in.mount, "written"))
	if d := seen.Sub(wrote); d < -time.Second || d > time.Second {
		t.Errorf("mtime through the mount after a write is %v, the write was at %v", seen, wrote)
	}
	time.Sleep(2 * time.Second) // a write-back now would carry a later time
	for _, name := range []string{"written", "touched"} {
		if err := os.Rename(filepath.Join(in.mount, name), filepath.Join(in.mount, name+".renamed")); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]time.Time{"written.renamed": seen, "touched.renamed": explicit}
	for name, w := range want {
		sameFile(t, filepath.Join(in.backing, name), data)
		if got := mtimeOf(t, filepath.Join(in.backing, name)); !got.Equal(w) {
			t.Errorf("backing %s has mtime %v after the rename, want %v", name, got, w)
		}
		if got := mtimeOf(t, filepath.Join(in.mount, name)); !got.Equal(w) {
			t.Errorf("%s through the mount has mtime %v after the rename, want %v", name, got, w)
		}
	}
	must(t, "local", "down", "--mount", in.mount)
	for name, w := range want {
		if got := mtimeOf(t, filepath.Join(in.backing, name)); !got.Equal(w) {
			t.Errorf("backing %s has mtime %v after down, want %v", name, got, w)
		}
	}
}

// TestExplicitTimesSurviveWriteBack sets explicit modification times on
// files whose data is still dirty in the cache, as cp -p and tar do after
// writing, by path and through the open descriptor. A write-back later must
// not move them: the backing files must end with those times, as if the job
// had used the backing file system directly.
func TestExplicitTimesSurviveWriteBack(t *testing.T) {
	requireFUSE(t)
	for name, extra := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 3, extra...)
			data := randomBytes(3<<20+5, 11)
			byPath := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
			if err := os.WriteFile(filepath.Join(in.mount, "by-path"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(filepath.Join(in.mount, "by-path"), byPath, byPath); err != nil {
				t.Fatal(err)
			}
			byFd := time.Date(2002, 3, 4, 5, 6, 7, 8000, time.UTC)
			writeThenFutimes(t, filepath.Join(in.mount, "by-fd"), data, byFd)
			time.Sleep(2 * time.Second) // a write-back now would carry a later time
			want := map[string]time.Time{"by-path": byPath, "by-fd": byFd}
			for name, w := range want {
				if got := mtimeOf(t, filepath.Join(in.mount, name)); !got.Equal(w) {
					t.Errorf("%s through the mount has mtime %v, want %v", name, got, w)
				}
			}
			must(t, "local", "down", "--mount", in.mount)
			for name, w := range want {
				sameFile(t, filepath.Join(in.backing, name), data)
				if got := mtimeOf(t, filepath.Join(in.backing, name)); !got.Equal(w) {
					t.Errorf("backing %s has mtime %v after down, want %v", name, got, w)
				}
			}
		})
	}
}

// TestExplicitTimeSurvivesKilledServers sets an explicit modification time
// on a file whose data is dirty in the cache, which writes the data to the
// backing file first, and kills every server with SIGKILL before the index
// calls the data clean (it commits nothing on its own during the test).
// The restarted servers find the data dirty; the backing file already holds
// it, and must keep the explicit time through the flush, with every byte.
func TestExplicitTimeSurvivesKilledServers(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2, append(holdDirty, "--server-arg=--commit-interval=1h")...)
	data := randomBytes(5<<20+7, 13)
	if err := os.WriteFile(filepath.Join(in.mount, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	explicit := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(in.mount, "f"), explicit, explicit); err != nil {
		t.Fatal(err)
	}
	for _, s := range readState(t, in.cacheDir).Servers {
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, s.PID)
	}
	time.Sleep(time.Second) // a write-back now would carry a later time
	must(t, upArgs(in, 2)...)
	must(t, "local", "flush", "--mount", in.mount, in.mount)
	sameFile(t, filepath.Join(in.backing, "f"), data)
	if got := mtimeOf(t, filepath.Join(in.backing, "f")); !got.Equal(explicit) {
		t.Errorf("backing f has mtime %v after the restart's flush, want %v", got, explicit)
	}
	must(t, "local", "down", "--mount", in.mount)
	if got := mtimeOf(t, filepath.Join(in.backing, "f")); !got.Equal(explicit) {
		t.Errorf("backing f has mtime %v after down, want %v", got, explicit)
	}
}

// TestChangeInPlaceMovesModificationTime changes an old file in place,
// without truncating it, through the mount. After the close, and long
// before the data is written back, the file must show a modification time
// of about the change, not its old one: rsync and make compare it, and a
// file of the same size with its old time reads as unchanged to them.
func TestChangeInPlaceMovesModificationTime(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 3)
	p := filepath.Join(in.mount, "f")
	if err := os.WriteFile(p, randomBytes(2<<20, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("changed"), 1<<20); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mtimeOf(t, p); got.Sub(wrote).Abs() > 2*time.Second {
		t.Errorf("mtime after the change and close is %v, the change was at %v", got, wrote)
	}
	must(t, "local", "down", "--mount", in.mount)
	if got := mtimeOf(t, filepath.Join(in.backing, "f")); got.Before(wrote.Add(-time.Second)) {
		t.Errorf("backing file has mtime %v after down, before the change at %v", got, wrote)
	}
}

// writeThenFutimes writes data to a new file at path and sets its times to
// at through the descriptor, before closing it.
func writeThenFutimes(t *testing.T, path string, data []byte, at time.Time) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(at.UnixNano())
	if err := unix.Futimes(int(f.Fd()), []unix.Timeval{tv, tv}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mtimeOf(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}
