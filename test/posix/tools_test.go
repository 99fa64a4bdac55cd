package posix

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// repoRoot returns the root of the repository, two levels above this
// package.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// cargoTool installs a pinned crates.io tool with hack/cargo-tool.sh (a
// cached no-op after the first run) and returns its path. A tool that
// cannot be installed fails the test: a suite must never pass by not
// running.
func cargoTool(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), "hack", "cargo-tool.sh"), name)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("installing %s with hack/cargo-tool.sh: %v\n%s", name, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
