package posix

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burstcache/burstcache/test/repo"
)

// cargoTool installs a pinned crates.io tool with hack/cargo-tool.sh (a
// cached no-op after the first run) and returns its path.
func cargoTool(t *testing.T, name string) string {
	t.Helper()
	return hackTool(t, "cargo-tool.sh", name)
}

// debianTool installs a Debian package's tool with hack/debian-tool.sh (a
// no-op where the machine has it) and returns its path.
func debianTool(t *testing.T, name string) string {
	t.Helper()
	return hackTool(t, "debian-tool.sh", name)
}

// hackTool runs the installer script of hack/ for the tool name and returns
// the path it prints. A tool that cannot be installed fails the test: a
// suite must never pass by not running.
func hackTool(t *testing.T, script, name string) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", script), name)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("installing %s with hack/%s: %v\n%s", name, script, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
