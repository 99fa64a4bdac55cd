package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAMountKilledAtRandomLosesNothingAcknowledged renames files over one
// another through a 3-server instance while the test holds every file
// open, so that each rename first gives the file it replaces a hidden
// name, and writes, truncates and removes some, until the mount is killed with
// SIGKILL at a random moment: within a rename, between the hiding and the
// rename itself, or anywhere else. After down, whatever a close
// acknowledged must be in the backing directory, every name known to
// exist must be there, no name whose removal (or rename away) succeeded
// may come back, and no hidden name may be left: the files the dead mount
// had hidden for renames that did not take place have their names back,
// and the others are gone.
//
// It depends on timing as much as on its seed: soak it with -count.
func TestAMountKilledAtRandomLosesNothingAcknowledged(t *testing.T) {
	requireFUSE(t)
	for name, extra := range map[string][]string{"no client cache": nil, "client cache": {"--client-cache"}} {
		t.Run(name, func(t *testing.T) { mountKillSoak(t, extra) })
	}
}

func mountKillSoak(t *testing.T, extra []string) {
	rng := killRand(t, 1)
	in := dirs(t)
	up(t, in, 3, append(holdDirty, extra...)...)
	k := &killRun{t: t, rng: rng, mount: in.mount, backing: in.backing, known: map[string][]byte{}, exists: map[string]bool{}}
	for _, name := range killFiles {
		data := randomBytes(rng.IntN(1<<20)+1, byte(rng.Uint32()))
		if err := writeFile(filepath.Join(in.mount, name), data, os.O_CREATE|os.O_TRUNC, 0, false); err != nil {
			t.Fatal(err)
		}
		k.known[name], k.exists[name] = data, true
	}
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	mount := readState(t, in.cacheDir).MountPID
	delay := time.Duration(50+rng.IntN(400)) * time.Millisecond
	killed := make(chan struct{})
	go func() {
		time.Sleep(delay)
		_ = syscall.Kill(mount, syscall.SIGKILL)
		close(killed)
	}()
	ops := 0
	for done := false; !done; ops++ {
		// Hold each file open, as a reader of it would, so that a rename
		// over it hides it first.
		for _, name := range killFiles {
			if f, err := os.Open(filepath.Join(in.mount, name)); err == nil {
				held = append(held, f)
			}
		}
		from, to := killFiles[rng.IntN(len(killFiles))], killFiles[rng.IntN(len(killFiles))]
		switch {
		case !k.exists[from]:
			k.rewrite(from, rng.IntN(1<<20)+1, false)
		case rng.IntN(3) == 0:
			k.step("") // a rewrite, write, truncate, unlink or rename
		case from != to:
			k.rename(from, to)
		}
		select {
		case <-killed:
			done = true
		default:
		}
	}
	waitGone(t, mount)
	for _, f := range held {
		f.Close()
	}
	held = nil
	k.log = append(k.log, fmt.Sprintf("mount killed after %v", delay))
	r := burstcache(t, "local", "down", "--mount", in.mount)
	if r.code != 7 {
		t.Fatalf("down after the mount was killed: exit %d, want 7:\n%s", r.code, r.out)
	}
	t.Logf("%d operations before the kill after %v; %d files known at the end", ops, delay, len(k.known))
	k.check("in the backing directory after down", in.backing)
	for name, exists := range k.exists {
		if _, err := os.Lstat(filepath.Join(in.backing, name)); exists && errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s, which exists, is gone after down; down said:\n%s\noperations:\n%s", name, r.out, strings.Join(k.log, "\n"))
		}
	}
	hidden, err := filepath.Glob(filepath.Join(in.backing, ".burstcache-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(hidden) > 0 {
		t.Fatalf("hidden names left after down: %v; down said:\n%s", hidden, r.out)
	}
}
