package integration

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput checks that each kind of bad input gets a clear message and
// its own exit code, and leaves nothing mounted or running.
func TestBadInput(t *testing.T) {
	requireFUSE(t)
	tests := map[string]struct {
		// prepare sets the scene and returns the command line.
		prepare  func(t *testing.T, in instance) []string
		wantCode int
		wantText string
	}{
		"missing backing directory": {
			prepare: func(t *testing.T, in instance) []string {
				return localUp(in, filepath.Join(in.backing, "nope"))
			},
			wantCode: 2, wantText: "backing directory",
		},
		"unreadable backing directory": {
			prepare: func(t *testing.T, in instance) []string {
				os.Chmod(in.backing, 0o700)
				return append(localUp(in, in.backing), "--uid", "1000", "--gid", "1000")
			},
			wantCode: 2, wantText: "cannot be read as 1000:1000",
		},
		"mount point in use": {
			prepare: func(t *testing.T, in instance) []string {
				busy := instance{backing: in.backing, mount: in.mount, cacheDir: in.cacheDir + "-other"}
				up(t, busy, 1)
				return localUp(in, in.backing)
			},
			wantCode: 4, wantText: "already in use",
		},
		"cache directory of another instance": {
			prepare: func(t *testing.T, in instance) []string {
				dir := filepath.Join(in.cacheDir, "server-0")
				os.MkdirAll(dir, 0o700)
				id, _ := json.Marshal(map[string]any{"instance": "local:/elsewhere", "index": 0, "servers": 1, "extentSize": 1 << 20})
				os.WriteFile(filepath.Join(dir, "server.json"), id, 0o600)
				return localUp(in, in.backing)
			},
			wantCode: 3, wantText: "belongs to another",
		},
		"unreachable servers": {
			prepare: func(t *testing.T, in instance) []string {
				ln, _ := net.Listen("tcp", "127.0.0.1:0")
				addr := ln.Addr().String()
				ln.Close()
				return []string{"mount", "--servers", addr, in.mount}
			},
			wantCode: 5, wantText: "reaching the cache servers",
		},
		"down of nothing": {
			prepare: func(t *testing.T, in instance) []string {
				return []string{"local", "down", "--mount", in.mount}
			},
			wantCode: 2, wantText: "no local burstcache instance",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			t.Cleanup(func() { teardown(t, in) })
			args := tc.prepare(t, in)
			mountedBefore := isMounted(t, in.mount)
			r := burstcache(t, args...)
			if r.code != tc.wantCode || !strings.Contains(r.out, tc.wantText) {
				t.Errorf("burstcache %s: exit %d, want %d with %q:\n%s", strings.Join(args, " "), r.code, tc.wantCode, tc.wantText, r.out)
			}
			if isMounted(t, in.mount) != mountedBefore {
				t.Errorf("the failed command changed what is mounted on %s", in.mount)
			}
			if _, err := os.Stat(filepath.Join(in.cacheDir, "local.json")); err == nil {
				t.Errorf("the failed command left state behind in %s", in.cacheDir)
			}
		})
	}
}

func localUp(in instance, backing string) []string {
	return []string{"local", "up", "--backing", backing, "--mount", in.mount, "--cache-dir", in.cacheDir, "--capacity", "64Mi"}
}
