package posix

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burstcache/burstcache/test/repo"
)

// cargoTool installs a pinned crates.io tool with hack/cargo-tool.sh (a
// cached no-op after the first run) and returns its path. A tool that
// cannot be installed fails the test: a suite must never pass by not
// running.
func cargoTool(t *testing.T, name string) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "cargo-tool.sh"), name)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("installing %s with hack/cargo-tool.sh: %v\n%s", name, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
