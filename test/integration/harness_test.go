package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/local"
)

// bin is the burstcache binary under test.
var bin string

func TestMain(m *testing.M) {
	if os.Getenv(writerEnv) != "" {
		os.Exit(writerMain(os.Args[1:]))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin = os.Getenv("BURSTCACHE_BIN")
	if bin == "" {
		dir, err := os.MkdirTemp("", "burstcache-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "burstcache")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/burstcache/burstcache/cmd/burstcache").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building burstcache: %v\n%s", err, out)
			return 1
		}
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin = abs
	return m.Run()
}

// requireFUSE skips tests that cannot mount.
func requireFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
}

// result is the outcome of a command.
type result struct {
	out  string
	code int
}

// burstcache runs the binary and returns its output and exit code.
func burstcache(t *testing.T, args ...string) result {
	t.Helper()
	return burstcacheWithin(t, 0, args...)
}

// burstcacheWithin runs the binary as burstcache does, killing it after
// limit (unless zero): a command that should end at once and has not ends
// with code -1 and says so in its output.
func burstcacheWithin(t *testing.T, limit time.Duration, args ...string) result {
	t.Helper()
	ctx := context.Background()
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return result{out.String() + fmt.Sprintf("\n(killed: still running after %v)", limit), -1}
	case errors.As(err, &ee):
		return result{out.String(), ee.ExitCode()}
	case err != nil:
		t.Fatalf("running burstcache %v: %v", args, err)
	}
	return result{out.String(), 0}
}

// must runs the binary and fails the test unless it succeeds.
func must(t *testing.T, args ...string) string {
	t.Helper()
	r := burstcache(t, args...)
	if r.code != 0 {
		t.Fatalf("burstcache %s: exit %d\n%s", strings.Join(args, " "), r.code, r.out)
	}
	return r.out
}

// instance is a local instance under test.
type instance struct {
	backing, mount, cacheDir string
}

// dirs makes a backing directory, a mount point and a cache directory.
func dirs(t *testing.T) instance {
	t.Helper()
	root := t.TempDir()
	in := instance{filepath.Join(root, "backing"), filepath.Join(root, "mnt"), filepath.Join(root, "cache")}
	for _, d := range []string{in.backing, in.mount} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

// up starts a local instance and makes sure it is gone when the test ends,
// whatever happened.
func up(t *testing.T, in instance, servers int, extra ...string) {
	t.Helper()
	t.Cleanup(func() { teardown(t, in) })
	must(t, append(upArgs(in, servers), extra...)...)
}

// upArgs are the arguments of local up for the instance with servers
// servers: also those that start its stopped servers again.
func upArgs(in instance, servers int) []string {
	return []string{"local", "up", "--backing", in.backing, "--mount", in.mount,
		"--cache-dir", in.cacheDir, "--servers", fmt.Sprint(servers), "--capacity", "256Mi"}
}

// localState is the part of the local state file the tests read.
type localState struct {
	Servers  []serverState
	MountPID int
}

// serverState is the part of the state of a server the tests read.
type serverState struct {
	PID     int
	Data    string
	Control string
	Args    []string
}

func readState(t *testing.T, cacheDir string) localState {
	t.Helper()
	st, err := loadState(cacheDir)
	if err != nil {
		t.Fatalf("reading local state: %v", err)
	}
	return st
}

// loadState reads the state file as the binary does: its names may be any
// bytes, which it does not write as JSON strings.
func loadState(cacheDir string) (localState, error) {
	var st localState
	var file local.State
	b, err := os.ReadFile(filepath.Join(cacheDir, "local.json"))
	if err == nil {
		err = json.Unmarshal(b, &file)
	}
	st.MountPID = file.MountPID
	for _, s := range file.Servers {
		st.Servers = append(st.Servers, serverState{PID: s.PID, Data: s.Data, Control: s.Control, Args: s.Args})
	}
	return st, err
}

// teardown takes an instance down if a test left it up, and as a last
// resort kills its processes and detaches its mount.
func teardown(t *testing.T, in instance) {
	if t.Failed() {
		dumpLogs(t, in.cacheDir)
	}
	if _, err := os.Stat(filepath.Join(in.cacheDir, "local.json")); err != nil {
		forceUnmount(in.mount)
		return
	}
	st := readState(t, in.cacheDir)
	if r := burstcache(t, "local", "down", "--mount", in.mount); r.code != 0 {
		t.Logf("cleanup: local down: exit %d: %s", r.code, r.out)
	}
	// A pid of 0 (a mount that down stopped already) would be the test's
	// own process group.
	for _, s := range st.Servers {
		if s.PID > 0 {
			syscall.Kill(s.PID, syscall.SIGKILL)
		}
	}
	if st.MountPID > 0 {
		syscall.Kill(st.MountPID, syscall.SIGKILL)
	}
	forceUnmount(in.mount)
}

func forceUnmount(dir string) {
	for range 50 {
		if syscall.Unmount(dir, syscall.MNT_DETACH) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// isMounted reports whether something is mounted on dir.
func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// randomBytes returns n bytes of a pattern that depends on seed.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

// sameFile fails the test unless path holds want.
func sameFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading %q: %v", path, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%q: %d bytes that differ from the %d expected", path, len(got), len(want))
	}
}

// dumpLogs shows the end of the logs of an instance's processes.
func dumpLogs(t *testing.T, cacheDir string) {
	logs, _ := filepath.Glob(filepath.Join(cacheDir, "logs", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		t.Logf("%s:\n%s", filepath.Base(l), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}
