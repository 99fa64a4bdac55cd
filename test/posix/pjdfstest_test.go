package posix

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// pjdfstestConfig enables the optional features that the mount supports and
// expects no failure at all. Its naptime, the pause that must change a
// timestamp, is a format argument.
const pjdfstestConfig = `
[features]
utime_now = {}
utimensat = {}
rename_ctime = {}
posix_fallocate = {}

[settings]
naptime = %s
allow_remount = false
expected_failures = []

[dummy_auth]
entries = [
  ["nobody", "nogroup"],
  ["daemon", "daemon"],
]
`

// TestPjdfstest runs the pjdfstest suite (the Rust rewrite) over the mount,
// without and with the client cache. Without it, timestamps come from the
// backing file system, fine-grained; with it, the kernel keeps them with its
// coarse clock (a jiffy, up to 10 ms), so the naps are longer.
func TestPjdfstest(t *testing.T) {
	bin := cargoTool(t, "pjdfstest")
	tests := map[string]struct {
		opts    []mountOption
		naptime string
	}{
		"no client cache": {nil, "0.001"},
		"client cache":    {[]mountOption{withClientCache()}, "0.02"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { runPjdfstest(t, bin, tc.naptime, tc.opts) })
	}
}

func runPjdfstest(t *testing.T, bin, naptime string, opts []mountOption) {
	dir, _ := mountUnderTest(t, opts...)
	conf := filepath.Join(t.TempDir(), "pjdfstest.toml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, pjdfstestConfig, naptime), 0o644); err != nil {
		t.Fatal(err)
	}
	// A directory on another file system, for the EXDEV cases.
	secondary := publicTempDir(t)
	// The working directory stays off the mount: the child of a process
	// that serves the mount must not touch the mount before it has exec'd,
	// or a garbage collection in the server, which waits for the forking
	// thread, deadlocks with the child's request.
	cmd := exec.Command(bin, "-c", conf, "-p", dir, "-s", secondary)
	out, err := cmd.CombinedOutput()
	m := regexp.MustCompile(`Summary: (\d+) failed, (\d+) skipped, (\d+) passed`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("pjdfstest printed no summary: %v\n%s", err, out)
	}
	failed, _ := strconv.Atoi(string(m[1]))
	passed, _ := strconv.Atoi(string(m[3]))
	t.Logf("pjdfstest: %s", m[0])
	if err != nil || failed > 0 {
		t.Fatalf("pjdfstest failed: %v\n%s", err, regexp.MustCompile(`(?m)^.*FAILED\n.*$`).FindAll(out, -1))
	}
	if passed < 350 {
		t.Fatalf("pjdfstest passed only %d tests:\n%s", passed, out)
	}
}
