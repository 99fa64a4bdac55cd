package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestRestartRefusesOtherSettings: local up over a cache directory that
// holds dirty data starts the servers again with the arguments they were
// started with, to recover it. A flag given anew that differs from them
// (above all another identity) must be refused with a message naming the
// flag, the stored value and the way out, exit 2, and leave nothing
// running or mounted; flags left out keep the stored values, and flags
// equal to them pass. Up of a running mount keeps it as it is, and refuses
// another --client-cache.
func TestRestartRefusesOtherSettings(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	data := randomBytes(4<<20, 11)
	upWithUnwritableResult(t, in, 2, data)
	if r := burstcache(t, "local", "down", "--mount", in.mount); r.code != 6 {
		t.Fatalf("down with write-back failing: exit %d, want 6:\n%s", r.code, r.out)
	}
	for flag, tc := range map[string]struct {
		args       []string
		wantStored string
	}{
		"--uid":           {[]string{"--uid", "2000", "--gid", "1000"}, "differs from 1000"},
		"--gid":           {[]string{"--gid", "2000"}, "differs from 1000"},
		"--act-as-caller": {[]string{"--act-as-caller"}, "differs from false"},
		"--server-arg":    {[]string{"--server-arg=--dirty-high=50"}, `"--dirty-high=100,--dirty-low=100"`},
		"--servers":       {[]string{"--servers", "3"}, "differs from 2"},
		"--capacity":      {[]string{"--capacity", "512Mi"}, "differs from 268435456 bytes"},
		"--extent-size":   {[]string{"--extent-size", "4Mi"}, "differs from 1048576"},
	} {
		t.Run(flag, func(t *testing.T) {
			refusedRestart(t, in, append(upArgs(in, 2), tc.args...), flag, tc.wantStored)
		})
	}

	// Left out, the identity stays the stored one: the mount does not
	// check walks per caller for servers that do not act as each caller
	// (up as root without --uid and --gid would otherwise ask for it).
	os.Chown(filepath.Join(in.backing, "result"), 1000, 1000)
	must(t, upArgs(in, 2)...)
	st := readState(t, in.cacheDir)
	if args := strings.Join(st.Servers[0].Args, " "); !strings.Contains(args, "--uid 1000 --gid 1000") || strings.Contains(args, "--act-as-caller") {
		t.Errorf("restarted server runs with %q, want the stored --uid 1000", args)
	}
	if args := cmdline(t, st.MountPID); slices.Contains(args, "--per-caller") {
		t.Errorf("the mount of servers acting as uid 1000 checks walks per caller: %q", args)
	}
	// With its mount running, up restarts only the dead servers and keeps
	// the mount as it is: another --client-cache is refused too.
	victim := st.Servers[0].PID
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, victim)
	state, _ := os.ReadFile(filepath.Join(in.cacheDir, "local.json"))
	r := burstcache(t, append(upArgs(in, 2), "--client-cache")...)
	if r.code != 2 || !strings.Contains(r.out, "--client-cache true differs from false") {
		t.Errorf("up with --client-cache over a running mount without it: exit %d, want 2 naming the flag:\n%s", r.code, r.out)
	}
	if after, _ := os.ReadFile(filepath.Join(in.cacheDir, "local.json")); !bytes.Equal(after, state) {
		t.Errorf("the refused up changed the state:\n%s", after)
	}
	// Given equal to the stored values, the flags pass.
	must(t, append(upArgs(in, 2), append(holdDirty, "--uid", "1000", "--gid", "1000", "--extent-size", "1Mi")...)...)
	if pid := readState(t, in.cacheDir).Servers[0].PID; pid == victim {
		t.Errorf("server 0 was not started again")
	}
	if err := os.WriteFile(filepath.Join(in.mount, "after"), []byte("after the restart\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, "local", "down", "--mount", in.mount)
	sameFile(t, filepath.Join(in.backing, "result"), data)
	var fi syscall.Stat_t
	if err := syscall.Stat(filepath.Join(in.backing, "after"), &fi); err != nil || fi.Uid != 1000 || fi.Gid != 1000 {
		t.Errorf("file created after the restart: %v, owner %d:%d; want 1000:1000, the stored identity", err, fi.Uid, fi.Gid)
	}
}

// refusedRestart runs a local up that must be refused for flag, and checks
// that it started and mounted nothing and left the state as it was.
func refusedRestart(t *testing.T, in instance, args []string, flag, wantStored string) {
	t.Helper()
	state, err := os.ReadFile(filepath.Join(in.cacheDir, "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := burstcache(t, args...)
	for _, want := range []string{flag + " ", wantStored, "Omit " + flag, "local down --mount " + in.mount} {
		if !strings.Contains(r.out, want) {
			t.Errorf("up with another %s: output lacks %q:\n%s", flag, want, r.out)
		}
	}
	if r.code != 2 {
		t.Errorf("up with another %s: exit %d, want 2:\n%s", flag, r.code, r.out)
	}
	if isMounted(t, in.mount) {
		t.Errorf("up with another %s mounted %s", flag, in.mount)
	}
	if after, _ := os.ReadFile(filepath.Join(in.cacheDir, "local.json")); !bytes.Equal(after, state) {
		t.Errorf("up with another %s changed the state:\n%s", flag, after)
	}
	if pids := processesUsing(t, in.cacheDir); len(pids) > 0 {
		t.Errorf("up with another %s started processes %v over the cache directory", flag, pids)
	}
}

// processesUsing returns the processes whose command line names dir.
func processesUsing(t *testing.T, dir string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\x00")
}
