package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killServer kills server i of the instance with SIGKILL, waits until it
// is gone, and starts it again with local up over the same cache
// directory, on the same addresses.
func killServer(t *testing.T, in instance, i int) {
	t.Helper()
	restartServer(t, in, i, syscall.SIGKILL)
}

// restartServer stops server i of the instance with sig, waits until it is
// gone, and starts it again with local up over the same cache directory,
// on the same addresses.
func restartServer(t *testing.T, in instance, i int, sig syscall.Signal) {
	t.Helper()
	if err := stopAndRestart(in, i, sig, 0); err != nil {
		t.Fatal(err)
	}
}

// stopAndRestart is restartServer after delay, for a goroutine beside the
// test's: it reports errors rather than failing the test.
func stopAndRestart(in instance, i int, sig syscall.Signal, delay time.Duration) error {
	return stopAndStart(in, i, sig, delay, func(servers int) error {
		out, err := exec.Command(bin, upArgs(in, servers)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("local up: %w\n%s", err, out)
		}
		return nil
	})
}

// stopAndStart stops server i of the instance with sig after delay, waits
// until it is gone, and runs start with the number of servers.
func stopAndStart(in instance, i int, sig syscall.Signal, delay time.Duration, start func(servers int) error) error {
	time.Sleep(delay)
	st, err := loadState(in.cacheDir)
	if err != nil {
		return err
	}
	victim := st.Servers[i].PID
	if err := syscall.Kill(victim, sig); err != nil {
		return err
	}
	if err := waitDead(victim); err != nil {
		return err
	}
	return start(len(st.Servers))
}

// TestCloseAfterAServerRestart writes to a file that stays open, restarts
// the server before its periodic commit, and closes the file. A server
// killed lost the writes, and the close must say so instead of reporting
// them durable; a server stopped cleanly committed them first, and the
// close must succeed.
func TestCloseAfterAServerRestart(t *testing.T) {
	requireFUSE(t)
	for name, sig := range map[string]syscall.Signal{"killed": syscall.SIGKILL, "stopped cleanly": syscall.SIGTERM} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 1, append(holdDirty, "--server-arg=--commit-interval=1h")...)
			f, err := os.Create(filepath.Join(in.mount, "open"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			data := randomBytes(3<<20, 7)
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			restartServer(t, in, 0, sig)
			err = f.Close()
			if sig == syscall.SIGKILL {
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("close after the server lost the writes: %v, want EIO", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("close after the server stopped cleanly: %v", err)
			}
			must(t, "local", "down", "--mount", in.mount)
			sameFile(t, filepath.Join(in.backing, "open"), data)
		})
	}
}

// TestMappedWritesAfterCloseSurviveAServerCrash writes a file through a
// shared mapping after its descriptor was closed. The kernel sends those
// writes when the mapping goes, after the last close: stopping the mount
// must make them durable, so that a crash of the server afterwards loses
// nothing, as it loses nothing of a closed file.
func TestMappedWritesAfterCloseSurviveAServerCrash(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1, append(holdDirty, "--server-arg=--commit-interval=1h")...)
	data := randomBytes(2<<20, 8)
	writeMappedAfterClose(t, filepath.Join(in.mount, "mapped"), data)
	mount := readState(t, in.cacheDir).MountPID
	if err := syscall.Kill(mount, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitGone(t, mount)
	killServer(t, in, 0)
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "mapped"), data)
}

// writeMappedAfterClose creates path with len(data) bytes, maps it shared,
// closes the descriptor, copies data into the mapping and unmaps it.
func writeMappedAfterClose(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	copy(m, data)
	if err := syscall.Munmap(m); err != nil {
		t.Fatal(err)
	}
}

// TestDownReportsWhatTheMountLost restarts a server that lost writes made
// after a file's last close, before anything made them durable. The mount
// says so as it stops; local down must pass that on, not report every
// byte written back.
func TestDownReportsWhatTheMountLost(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1, append(holdDirty, "--server-arg=--commit-interval=1h")...)
	writeMappedAfterClose(t, filepath.Join(in.mount, "mapped"), randomBytes(2<<20, 9))
	killServer(t, in, 0)
	r := burstcache(t, "local", "down", "--mount", in.mount)
	if r.code != 7 || !strings.Contains(r.out, "restarted") {
		t.Fatalf("down after the mount lost writes: exit %d, want 7 and why:\n%s", r.code, r.out)
	}
	if isMounted(t, in.mount) {
		t.Errorf("still mounted after down")
	}
}

// TestDownReportsAKilledMount holds a file open in the mount, so that it
// does not stop in time and down kills it: whatever it held is lost, and
// down must say so.
func TestDownReportsAKilledMount(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1)
	f, err := os.Create(filepath.Join(in.mount, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := burstcache(t, "local", "down", "--mount", in.mount, "--unmount-timeout", "1s")
	if r.code != 7 {
		t.Fatalf("down that killed the mount: exit %d, want 7:\n%s", r.code, r.out)
	}
}

// TestDownReportsDroppedWriteBack writes a file through a shared mapping
// after its last close, kills the server, and unmaps the file: the kernel
// writes the pages back as the mapping goes, and the mount waits for the
// server. The mount is then told to stop with the server still away:
// after its grace it gives up, and the kernel drops the pages, telling no
// process. The mount must tell, and local down with it.
func TestDownReportsDroppedWriteBack(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1)
	w := startWriter(t, filepath.Join(in.mount, "mapped"), randomBytes(1<<20, 11), "mapped")
	if err := <-w.write(); err != nil {
		t.Fatal(err)
	}
	st := readState(t, in.cacheDir)
	victim := st.Servers[0].PID
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, victim)
	unmapped := w.sync()
	select {
	case err := <-unmapped:
		t.Fatalf("munmap with the server dead returned before the mount stopped: %v", err)
	case <-time.After(time.Second):
	}
	if err := syscall.Kill(st.MountPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-unmapped:
	case <-time.After(time.Minute):
		t.Fatal("munmap still waits after the mount was told to stop")
	}
	r := burstcache(t, "local", "down", "--mount", in.mount)
	if r.code == 0 || !strings.Contains(r.out, "dropped") {
		t.Fatalf("down after the kernel dropped a failed write-back: exit %d, want a failure that says why:\n%s", r.code, r.out)
	}
}

// TestDownRemovesHiddenNamesOfAKilledMount unlinks files while they are
// open, so that the mount gives them hidden names, writes to one of them,
// and kills the mount before their last close: nobody is left to remove the
// hidden names, and down must, once the data is written back. Files that
// were not unlinked stay.
func TestDownRemovesHiddenNamesOfAKilledMount(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	if err := os.Mkdir(filepath.Join(in.mount, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep := randomBytes(3<<20, 5)
	if err := os.WriteFile(filepath.Join(in.mount, "d", "keep"), keep, 0o644); err != nil {
		t.Fatal(err)
	}
	var open []*os.File
	for i := range 3 {
		p := filepath.Join(in.mount, "d", fmt.Sprintf("tmp%d", i))
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, f)
		if _, err := f.Write(randomBytes(1<<20, byte(i))); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		// Written after the unlink: dirty data of the hidden name.
		if _, err := f.Write(randomBytes(2<<20, byte(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	hidden := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(in.backing, "d", ".burstcache-open-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := hidden(); len(got) != 3 {
		t.Fatalf("backing directory holds hidden names %v, want 3", got)
	}
	mount := readState(t, in.cacheDir).MountPID
	if err := syscall.Kill(mount, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, mount)
	for _, f := range open {
		f.Close()
	}
	r := burstcache(t, "local", "down", "--mount", in.mount)
	if r.code != 7 {
		t.Fatalf("down after the mount was killed: exit %d, want 7:\n%s", r.code, r.out)
	}
	if got := hidden(); len(got) != 0 {
		t.Fatalf("hidden names left after down: %v\n%s", got, r.out)
	}
	sameFile(t, filepath.Join(in.backing, "d", "keep"), keep)
}

// TestATreeRemovedWhileAFileInItIsOpen removes a tree in which the test
// still has a file open, as a job's clean-up does while a process it
// started runs on: the removal succeeds, as on a local file system, and the
// file, written after it, is still read through its descriptor. Once the
// mount is killed, down removes the hidden name it moved out of the tree.
func TestATreeRemovedWhileAFileInItIsOpen(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	p := filepath.Join(in.mount, "job", "tmp", "log")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.RemoveAll(filepath.Join(in.mount, "job")); err != nil {
		t.Fatalf("removing the tree: %v", err)
	}
	data := randomBytes(2<<20, 3)
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading the open file back: %v (equal: %v)", err, bytes.Equal(got, data))
	}
	entries, err := os.ReadDir(in.backing)
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), ".burstcache-open-") {
		t.Fatalf("backing directory holds %v, %v; want only a hidden name", entries, err)
	}
	mount := readState(t, in.cacheDir).MountPID
	if err := syscall.Kill(mount, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, mount)
	f.Close()
	if r := burstcache(t, "local", "down", "--mount", in.mount); r.code != 7 {
		t.Fatalf("down after the mount was killed: exit %d, want 7:\n%s", r.code, r.out)
	}
	if entries, err := os.ReadDir(in.backing); err != nil || len(entries) != 0 {
		t.Fatalf("backing directory holds %v, %v after down; want nothing", entries, err)
	}
}

// TestFsyncOfADirectory fsyncs directories through the mount, as programs
// do after creating or renaming a file in them, in both durability modes:
// the entries live on the backing file system, where the fsync must go.
func TestFsyncOfADirectory(t *testing.T) {
	requireFUSE(t)
	for _, durability := range []string{"Cache", "Backing"} {
		t.Run(durability, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 2, "--server-arg=--durability="+durability)
			sub := filepath.Join(in.mount, "d")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sub, "f"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, dir := range []string{sub, in.mount} {
				d, err := os.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Sync(); err != nil {
					t.Errorf("fsync of directory %s: %v", dir, err)
				}
				d.Close()
			}
		})
	}
}

// TestDurabilityBackingAtCloseAndFsync checks spec.writeBack.durability
// on the data path: with --durability=Backing a close, and an fsync of a
// file still open, return only once the data is in the backing file,
// though the dirty watermarks would hold it in the cache; with the default
// (Cache) the backing file does not have it yet, so the check can fail.
func TestDurabilityBackingAtCloseAndFsync(t *testing.T) {
	requireFUSE(t)
	for durability, written := range map[string]bool{"Backing": true, "Cache": false} {
		t.Run(durability, func(t *testing.T) {
			in := dirs(t)
			up(t, in, 2, append(holdDirty, "--server-arg=--durability="+durability)...)
			closed := randomBytes(3<<20, 9)
			writeWhole(t, filepath.Join(in.mount, "closed"), closed)
			f, err := os.Create(filepath.Join(in.mount, "synced"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			synced := randomBytes(3<<20+5, 10)
			if _, err := f.Write(synced); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			for name, data := range map[string][]byte{"closed": closed, "synced": synced} {
				got, _ := os.ReadFile(filepath.Join(in.backing, name))
				if bytes.Equal(got, data) != written {
					t.Errorf("durability %s: backing file %s holds the data after close or fsync: %v, want %v",
						durability, name, !written, written)
				}
			}
		})
	}
}
