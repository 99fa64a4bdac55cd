package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRandomServerKillsLoseNothingAcknowledged writes, overwrites,
// truncates, removes and renames files through a 3-server instance while,
// round after round, a server is killed with SIGKILL at a random moment and
// started again by local up, the operations going on meanwhile, and a file
// written before the kill stays open until after the restart. Whatever a
// close or an fsync acknowledged must read back through the mount after
// every restart, and be in the backing directory after down; a name whose
// removal (or rename away) succeeded must not come back in either. An
// operation that failed leaves what it changed unknown until a later one
// settles it; no operation on a file that exists may fail as if it did
// not. The servers commit only when a close, an fsync or a change of names
// asks them to, so that nothing else makes the data durable.
//
// With the client cache the kernel holds written pages and sends them
// later: a close waits until the killed server is back to take them, and
// fails if it took some before it died.
//
// It depends on timing as much as on its seed: soak it with -count. A run
// takes about two seconds, or 15 more when a kill hides whether an unlink
// removed its file (the metadata server died with the removal sent): the
// file's writes, flushes and renames wait that long, for a removal that may
// still be under way.
func TestRandomServerKillsLoseNothingAcknowledged(t *testing.T) {
	requireFUSE(t)
	for name, extra := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		t.Run(name, func(t *testing.T) { killSoak(t, extra) })
	}
}

func killSoak(t *testing.T, extra []string) {
	rng := killRand(t, 0)
	in := dirs(t)
	const servers = 3
	up(t, in, servers, append(append(holdDirty, "--server-arg=--commit-interval=1h"), extra...)...)
	restart := startLauncher(t, in, servers)
	k := &killRun{t: t, rng: rng, mount: in.mount, backing: in.backing, known: map[string][]byte{}, exists: map[string]bool{}}
	ops, failed, heldLost := 0, 0, 0
	for round := range 8 {
		// A file written before the kill and closed after the restart:
		// its close must fail if the killed server took some of it.
		held := killFiles[rng.IntN(len(killFiles))]
		heldData := randomBytes(2<<20+rng.IntN(2<<20), byte(rng.Uint32()))
		f, err := os.OpenFile(filepath.Join(in.mount, held), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err == nil {
			_, err = f.Write(heldData)
		}
		if err != nil {
			t.Fatalf("round %d: writing %s: %v", round, held, err)
		}
		delete(k.known, held)
		k.exists[held] = true
		victim := rng.IntN(servers)
		delay := time.Duration(rng.IntN(40)) * time.Millisecond
		restarted := make(chan error, 1)
		go func() { restarted <- stopAndStart(in, victim, syscall.SIGKILL, delay, restart) }()
		for done := false; !done; {
			select {
			case err := <-restarted:
				if err != nil {
					t.Fatalf("round %d, server %d: %v", round, victim, err)
				}
				done = true
			default:
				ops++
				if !k.step(held) {
					failed++
				}
			}
		}
		if rng.IntN(2) == 0 {
			err = f.Sync()
		}
		err = errors.Join(err, f.Close())
		k.log = append(k.log, fmt.Sprintf("%s: held %d bytes over the kill of server %d after %v: %v", held, len(heldData), victim, delay, err))
		if err == nil {
			k.known[held] = heldData
		} else {
			heldLost++
		}
		k.check(fmt.Sprintf("after round %d (server %d killed after %v)", round, victim, delay), in.mount)
	}
	t.Logf("%d operations, %d of them failed by a kill; %d held files failed their close; %d files known at the end",
		ops, failed, heldLost, len(k.known))
	if len(k.exists) == 0 {
		t.Fatal("no file was known to exist or to be gone at the end: the test checked nothing")
	}
	// Writes that a failed close left behind are lost with the server that
	// took them: the mount says so again as it stops, and down passes it
	// on (exit 7), after writing back everything else.
	if r := burstcache(t, "local", "down", "--mount", in.mount); r.code != 0 && (r.code != 7 || !strings.Contains(r.out, "restarted")) {
		t.Fatalf("local down: exit %d\n%s", r.code, r.out)
	}
	k.check("in the backing directory after down", in.backing)
}

// killRand returns the random source of a kill soak, of stream stream, and
// logs its seed: BURSTCACHE_KILL_SEED, or the time.
func killRand(t *testing.T, stream uint64) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BURSTCACHE_KILL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (BURSTCACHE_KILL_SEED repeats it)", seed)
	return rand.New(rand.NewPCG(seed, stream))
}

// killRun is the state of TestRandomServerKillsLoseNothingAcknowledged:
// the files whose contents a close or an fsync acknowledged, and which
// names are known to exist or to be gone.
type killRun struct {
	t       *testing.T
	rng     *rand.Rand
	mount   string
	backing string
	known   map[string][]byte
	// exists is true for a name known to exist, false for one known to be
	// gone, and has no entry for one a failed operation left unknown.
	exists map[string]bool
	// log records the operations, for a failure's message.
	log []string
}

var killFiles = []string{"a", "b", "c", "d", "e", "f"}

// step makes one random change to one file other than except and reports
// whether it succeeded. A change that failed makes what it changed
// unknown.
func (k *killRun) step(except string) bool {
	name := killFiles[k.rng.IntN(len(killFiles))]
	if name == except {
		return true
	}
	path := filepath.Join(k.mount, name)
	old, known := k.known[name]
	var next []byte
	var err error
	var what string
	switch op := k.rng.IntN(10); {
	case op < 3 || !known && op < 8:
		return k.rewrite(name, k.rng.IntN(3<<20)+1, k.rng.IntN(2) == 0)
	case op < 6:
		// Overwrite a range, possibly past the end.
		off := k.rng.IntN(len(old) + 1)
		chunk := randomBytes(k.rng.IntN(1<<20)+1, byte(k.rng.Uint32()))
		next = append([]byte(nil), old...)
		if end := off + len(chunk); end > len(next) {
			next = append(next, make([]byte, end-len(next))...)
		}
		copy(next[off:], chunk)
		what = fmt.Sprintf("write %d bytes at %d", len(chunk), off)
		err = writeFile(path, chunk, 0, int64(off), k.rng.IntN(2) == 0)
	case op < 8:
		// Truncate, shorter or longer, made durable by an fsync.
		size := k.rng.IntN(len(old) + 1<<20)
		next = append([]byte(nil), old[:min(size, len(old))]...)
		next = append(next, make([]byte, size-len(next))...)
		what = fmt.Sprintf("truncate to %d", size)
		err = truncateSynced(path, int64(size))
	case op == 8:
		return k.unlink(name)
	default:
		to := killFiles[k.rng.IntN(len(killFiles))]
		if to == except || to == name {
			return true
		}
		return k.rename(name, to)
	}
	k.logged(name, what, err)
	if err != nil {
		delete(k.known, name)
		if !k.exists[name] {
			delete(k.exists, name) // an O_CREAT may have made it
		}
		return false
	}
	k.exists[name] = true
	k.known[name] = next
	return true
}

// rewrite writes size random bytes over the whole of name, creating it,
// made durable by the close or by an fsync before it (sync), and reports
// whether it succeeded.
func (k *killRun) rewrite(name string, size int, sync bool) bool {
	data := randomBytes(size, byte(k.rng.Uint32()))
	err := writeFile(filepath.Join(k.mount, name), data, os.O_CREATE|os.O_TRUNC, 0, sync)
	k.logged(name, fmt.Sprintf("rewrite %d bytes", len(data)), err)
	if err != nil {
		delete(k.known, name)
		if !k.exists[name] {
			delete(k.exists, name) // the O_CREAT may have made it
		}
		return false
	}
	k.known[name], k.exists[name] = data, true
	return true
}

func (k *killRun) unlink(name string) bool {
	err := os.Remove(filepath.Join(k.mount, name))
	k.logged(name, "unlink", err)
	if exists, ok := k.exists[name]; ok && !exists && err == nil {
		k.t.Fatalf("%s: unlink of a removed file succeeded; operations:\n%s", name, strings.Join(k.log, "\n"))
	}
	delete(k.known, name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		delete(k.exists, name)
		return false
	}
	k.exists[name] = false
	return true
}

func (k *killRun) rename(from, to string) bool {
	err := os.Rename(filepath.Join(k.mount, from), filepath.Join(k.mount, to))
	k.logged(from, "rename to "+to, err)
	if exists, ok := k.exists[from]; ok && !exists && err == nil {
		k.t.Fatalf("%s: rename of a removed file succeeded; operations:\n%s", from, strings.Join(k.log, "\n"))
	}
	if err != nil {
		delete(k.known, from)
		delete(k.known, to)
		if !k.exists[to] {
			delete(k.exists, to) // from may have moved there
		}
		if !errors.Is(err, fs.ErrNotExist) || k.exists[from] {
			delete(k.exists, from) // it may have moved
		}
		return false
	}
	if data, ok := k.known[from]; ok {
		k.known[to] = data
	} else {
		delete(k.known, to)
	}
	delete(k.known, from)
	k.exists[to], k.exists[from] = true, false
	return true
}

// logged records an operation on name, and fails the test if it failed as
// if a file known to exist did not.
func (k *killRun) logged(name, what string, err error) {
	k.t.Helper()
	k.log = append(k.log, fmt.Sprintf("%s: %s: %v", name, what, err))
	if k.exists[name] && errors.Is(err, fs.ErrNotExist) {
		k.t.Fatalf("%s: %s failed as if the file did not exist; operations:\n%s", name, what, strings.Join(k.log, "\n"))
	}
}

// check fails the test unless every known file under dir holds what was
// acknowledged, and no name known to be gone is there.
func (k *killRun) check(when, dir string) {
	k.t.Helper()
	for name, exists := range k.exists {
		if _, err := os.Lstat(filepath.Join(dir, name)); !exists && !errors.Is(err, fs.ErrNotExist) {
			k.t.Fatalf("%s: %s, which was removed, is there (%v); operations:\n%s", when, name, err, strings.Join(k.log, "\n"))
		}
	}
	for name, want := range k.known {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			k.t.Fatalf("%s: reading %s: %v", when, name, err)
		}
		if !bytes.Equal(got, want) {
			at := firstDifference(got, want)
			var backingSize int64 = -1
			if fi, err := os.Stat(filepath.Join(k.backing, name)); err == nil {
				backingSize = fi.Size()
			}
			k.t.Fatalf("%s: %s holds %d bytes, %d acknowledged; first difference at byte %d, past which it holds %s; the backing file has %d bytes; operations:\n%s",
				when, name, len(got), len(want), at, describeTail(got[at:]), backingSize, strings.Join(k.log, "\n"))
		}
	}
}

// writeFile writes data at off of path, opened with flags besides
// O_WRONLY, fsyncs first if sync, and closes it.
func writeFile(path string, data []byte, flags int, off int64, sync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|flags, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, off)
	if err == nil && sync {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func truncateSynced(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// describeTail says whether b is all zeros, for a failure's message: a
// size that came back reads zeros, data that came back does not.
func describeTail(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	if bytes.Count(b, []byte{0}) == len(b) {
		return fmt.Sprintf("%d zero bytes", len(b))
	}
	return fmt.Sprintf("%d bytes, not all zero", len(b))
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// startLauncher starts a process that runs local up for the instance of
// servers servers each time the returned function is called, and returns
// that function. The
// process starts before the test opens any file of the mount, and holds
// none: a process that forks to run a command holds copies of its open
// files until the exec, which closes them, and the close of a file with
// dirty pages in the kernel's page cache (the client cache) waits until
// they are written back, to the killed server that the command would
// start again.
func startLauncher(t *testing.T, in instance, servers int) func(servers int) error {
	t.Helper()
	log := filepath.Join(t.TempDir(), "launcher.log")
	logf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("sh", "-c", `while read -r _; do "$0" "$@" >&2; echo $?; done`, bin)
	cmd.Args = append(cmd.Args, upArgs(in, servers)...)
	cmd.Stderr = logf
	stdin, answers := startPiped(t, cmd)
	return func(n int) error {
		if n != servers {
			return fmt.Errorf("the launcher starts %d servers, not %d", servers, n)
		}
		if _, err := fmt.Fprintln(stdin); err != nil {
			return err
		}
		code, err := answers.ReadString('\n')
		if err != nil {
			return err
		}
		if code = strings.TrimSpace(code); code != "0" {
			out, _ := os.ReadFile(log)
			return fmt.Errorf("local up: exit %s\n%s", code, out)
		}
		return nil
	}
}
