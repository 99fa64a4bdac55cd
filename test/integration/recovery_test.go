package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdDirty keeps written data dirty: write-back starts only when the cache
// is full.
var holdDirty = []string{"--server-arg=--dirty-high=100", "--server-arg=--dirty-low=100"}

// TestKilledServerLosesNothing kills a server holding dirty data with
// SIGKILL, starts it again with local up, and checks that down writes
// everything back. The writer either fsyncs, as a checkpoint does, or
// only closes the file: with Cache durability either makes the data
// survive a crash of the server. The servers commit nothing on their own
// during the test, so only the fsync or the close can have.
func TestKilledServerLosesNothing(t *testing.T) {
	for name, write := range map[string]func(*testing.T, string, []byte){
		"fsync": writeSynced,
		"close": func(t *testing.T, path string, data []byte) {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) { killServerAfter(t, write) })
	}
}

func killServerAfter(t *testing.T, write func(*testing.T, string, []byte)) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2, append(holdDirty, "--server-arg=--commit-interval=1h")...)
	data := randomBytes(9<<20+3, 5)
	path := filepath.Join(in.mount, "ckpt")
	write(t, path, data)
	if fi, _ := os.Stat(filepath.Join(in.backing, "ckpt")); fi.Size() == int64(len(data)) {
		t.Fatalf("data was written back already; the test needs it dirty")
	}
	victim := readState(t, in.cacheDir).Servers[0].PID
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, victim)
	if r := burstcache(t, "local", "status", "--mount", in.mount); r.code != 5 || !strings.Contains(r.out, "DOWN") {
		t.Errorf("status with a dead server: exit %d, want 5 and a server DOWN:\n%s", r.code, r.out)
	}
	must(t, upArgs(in, 2)...)
	if pid := readState(t, in.cacheDir).Servers[0].PID; pid == victim {
		t.Fatalf("server 0 was not restarted")
	}
	sameFile(t, path, data)
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "ckpt"), data)
}

// TestKilledServersKeepPagesTheKernelHolds opens a file through a mount
// with the client cache, kills every server with SIGKILL, writes the file,
// whose pages then wait in the kernel, and fsyncs it: the kernel writes
// the pages back while no server answers. The mount must wait for the servers, which
// local up starts again, rather than fail the writes, which would make the
// kernel drop the pages: the fsync then succeeds, and down writes every
// byte back. The writer is a process of its own: a close of the file, as
// the test process's own fork for local up would make, waits for the
// pages too.
func TestKilledServersKeepPagesTheKernelHolds(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2, "--client-cache")
	data := randomBytes(256<<10+77, 8)
	w := startWriter(t, filepath.Join(in.mount, "ckpt"), data, "")
	for _, s := range readState(t, in.cacheDir).Servers {
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitGone(t, s.PID)
	}
	select {
	case err := <-w.write():
		if err != nil {
			t.Fatalf("writing into the page cache with every server dead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writing into the page cache with every server dead still waits")
	}
	synced := w.sync()
	select {
	case err := <-synced:
		t.Fatalf("fsync with every server dead returned before they were back: %v", err)
	case <-time.After(time.Second):
	}
	must(t, upArgs(in, 2)...)
	select {
	case err := <-synced:
		if err != nil {
			t.Fatalf("fsync once the servers were back: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fsync still waits after the servers came back")
	}
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "ckpt"), data)
}

// TestTruncatedFileStaysTruncatedAfterAKill rewrites a file that an fsync
// made durable on every server with a shorter one (O_TRUNC) and closes it,
// then kills each server in turn: the file must read as the shorter one,
// through the mount and in the backing directory after down, never as it
// followed by what is left of the longer one.
func TestTruncatedFileStaysTruncatedAfterAKill(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 3, append(holdDirty, "--server-arg=--commit-interval=1h")...)
	path := filepath.Join(in.mount, "ckpt")
	writeSynced(t, path, randomBytes(4<<20, 1))
	short := randomBytes(100<<10, 2)
	if err := os.WriteFile(path, short, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		killServer(t, in, i)
		sameFile(t, path, short)
	}
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "ckpt"), short)
}

// TestFailedRenameKeepsSizes writes files whose extents live on every
// server and that stay dirty, kills one server with SIGKILL, tries to
// rename their directory (which fails: a server it must write back from
// is down), and starts the server again. The rename did not happen; every
// file must still read back whole, as it was closed, through the mount
// and in the backing directory after down.
func TestFailedRenameKeepsSizes(t *testing.T) {
	requireFUSE(t)
	const servers = 3
	for victim := range servers {
		t.Run(fmt.Sprintf("server %d down", victim), func(t *testing.T) {
			in := dirs(t)
			up(t, in, servers, append(holdDirty, "--server-arg=--commit-interval=1h")...)
			files := map[string][]byte{}
			for i := range 6 {
				// Three extents: the last on another server than the
				// metadata server of the file, which knows its size only
				// from its record.
				files[fmt.Sprintf("d/f%d", i)] = randomBytes(5<<19+i*12345, byte(30+i))
			}
			if err := os.Mkdir(filepath.Join(in.mount, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for n, data := range files {
				if err := os.WriteFile(filepath.Join(in.mount, n), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pid := readState(t, in.cacheDir).Servers[victim].PID
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitGone(t, pid)
			if err := os.Rename(filepath.Join(in.mount, "d"), filepath.Join(in.mount, "e")); err == nil {
				t.Fatal("rename succeeded with a server down that held dirty data")
			}
			must(t, upArgs(in, servers)...)
			for n, want := range files {
				got, err := os.ReadFile(filepath.Join(in.mount, n))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s after the failed rename: %d bytes (%v), want %d; first difference at %d", n, len(got), err, len(want), firstDifference(got, want))
				}
			}
			must(t, "local", "down", "--mount", in.mount)
			for n, want := range files {
				sameFile(t, filepath.Join(in.backing, n), want)
			}
		})
	}
}

// upWithUnwritableResult starts servers that act as uid 1000, writes data
// to the file "result" through the mount, where it stays dirty, and makes
// its write-back impossible until the backing file goes back to uid 1000.
func upWithUnwritableResult(t *testing.T, in instance, servers int, data []byte) {
	t.Helper()
	if err := os.Chown(in.backing, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	// The servers act as uid 1000: let it reach the backing directory.
	os.Chmod(filepath.Dir(in.backing), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(in.backing)), 0o755)
	up(t, in, servers, append(holdDirty, "--uid", "1000", "--gid", "1000")...)
	if err := os.WriteFile(filepath.Join(in.mount, "result"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The servers act as uid 1000, which may no longer write the backing
	// directory's file once it belongs to another user (a mode change alone
	// would not do: write-back reaches a read-only file for its owner).
	if err := os.Chown(filepath.Join(in.backing, "result"), 2000, 2000); err != nil {
		t.Fatal(err)
	}
}

func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	if err := waitDead(pid); err != nil {
		t.Fatal(err)
	}
}

// waitDead waits up to 10 seconds for process pid to end.
func waitDead(pid int) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return nil
		}
	}
	return fmt.Errorf("pid %d did not die", pid)
}

// TestFailedWriteBackKeepsDataForTheNextUp makes write-back impossible,
// checks that down says so and exits 6, then that up over the same cache
// directory recovers the data and a later down writes it back.
func TestFailedWriteBackKeepsDataForTheNextUp(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	data := randomBytes(4<<20, 6)
	upWithUnwritableResult(t, in, 2, data)
	r := burstcache(t, "local", "down", "--mount", in.mount)
	if r.code != 6 || !strings.Contains(r.out, "write-back incomplete") {
		t.Fatalf("down with write-back failing: exit %d, want 6:\n%s", r.code, r.out)
	}
	if isMounted(t, in.mount) {
		t.Errorf("still mounted after a failed down")
	}
	os.Chown(filepath.Join(in.backing, "result"), 1000, 1000)
	must(t, upArgs(in, 2)...)
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "result"), data)
}

// TestInvalidateShowsOutOfBandChanges changes a cached file behind the
// cache's back and checks that invalidate makes the mount show it.
func TestInvalidateShowsOutOfBandChanges(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	old := randomBytes(2<<20, 7)
	if err := os.WriteFile(filepath.Join(in.backing, "input"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	up(t, in, 2)
	must(t, "local", "preload", "--mount", in.mount, filepath.Join(in.mount, "input"))
	sameFile(t, filepath.Join(in.mount, "input"), old)
	changed := randomBytes(3<<20, 8)
	if err := os.WriteFile(filepath.Join(in.backing, "input"), changed, 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "local", "invalidate", "--mount", in.mount, filepath.Join(in.mount, "input"))
	sameFile(t, filepath.Join(in.mount, "input"), changed)
}

// TestInvalidateKeepsTheSizeOfDataNotWrittenBack writes a file whose only
// data is an extent that another server than its metadata server holds
// dirty, and invalidates it: the file must keep its size. A metadata
// server that forgot the size its writes announced would show the file as
// long as its backing file, and an append would land over the dirty data.
func TestInvalidateKeepsTheSizeOfDataNotWrittenBack(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	p := filepath.Join(in.mount, "tail")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	tail := randomBytes(5000, 9)
	if _, err := f.WriteAt(tail, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	must(t, "local", "invalidate", "--mount", in.mount, in.mount)
	if fi, err := os.Stat(p); err != nil || fi.Size() != 1<<20+5000 {
		t.Fatalf("stat after invalidate: %v, %v; want %d bytes", fi, err, 1<<20+5000)
	}
	appendAndClose(t, p, "appended")
	must(t, "local", "down", "--mount", in.mount)
	want := append(append(make([]byte, 1<<20), tail...), "appended"...)
	sameFile(t, filepath.Join(in.backing, "tail"), want)
}

// TestInvalidateReachesTheKernel changes cached files behind the cache's
// back, one read through the cache shorter and one written through it
// longer, and checks that invalidate makes a mount show
// them with and without the client cache, whose kernel keeps the pages
// and the sizes of the files it read: an append after the invalidate must
// land at the new end, and a file open with unwritten pages in the
// kernel's cache must keep what was written into it.
func TestInvalidateReachesTheKernel(t *testing.T) {
	for name, extra := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		t.Run(name, func(t *testing.T) {
			requireFUSE(t)
			in := dirs(t)
			up(t, in, 2, extra...)
			shrunk, grown := filepath.Join(in.mount, "shrunk"), filepath.Join(in.mount, "grown")
			put(t, filepath.Join(in.backing, "shrunk"), randomBytes(3<<20+5000, 1))
			put(t, grown, randomBytes(70000, 2))
			sameFile(t, shrunk, randomBytes(3<<20+5000, 1))
			sameFile(t, grown, randomBytes(70000, 2))
			must(t, "local", "flush", "--mount", in.mount, in.mount)
			open, err := os.OpenFile(filepath.Join(in.mount, "open"), os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer open.Close()
			if _, err := open.Write(randomBytes(9000, 3)); err != nil {
				t.Fatal(err)
			}

			put(t, filepath.Join(in.backing, "shrunk"), randomBytes(5000, 4))
			put(t, filepath.Join(in.backing, "grown"), randomBytes(1<<20+3000, 5))
			must(t, "local", "invalidate", "--mount", in.mount, in.mount)
			sameFile(t, shrunk, randomBytes(5000, 4))
			sameFile(t, grown, randomBytes(1<<20+3000, 5))
			if fi, err := os.Stat(shrunk); err != nil || fi.Size() != 5000 {
				t.Errorf("stat %s: %v, %v; want 5000 bytes", shrunk, fi, err)
			}

			appendAndClose(t, grown, "appended")
			if err := open.Close(); err != nil {
				t.Fatal(err)
			}
			must(t, "local", "flush", "--mount", in.mount, in.mount)
			want := append(randomBytes(1<<20+3000, 5), "appended"...)
			sameFile(t, filepath.Join(in.backing, "grown"), want)
			sameFile(t, grown, want)
			sameFile(t, filepath.Join(in.backing, "open"), randomBytes(9000, 3))
		})
	}
}

// appendAndClose appends data to path through O_APPEND and closes it,
// failing the test on any error, the close's included.
func appendAndClose(t *testing.T, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
