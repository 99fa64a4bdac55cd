package integration

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
		"a mount key that cannot be read": {
			prepare: func(t *testing.T, in instance) []string {
				return []string{"mount", "--servers", "127.0.0.1:1", "--mount-key-file", filepath.Join(in.backing, "nope"), in.mount}
			},
			wantCode: 2, wantText: "--mount-key-file",
		},
		"a public mount key that is none": {
			prepare: func(t *testing.T, in instance) []string {
				secret := filepath.Join(in.backing, "secret")
				os.WriteFile(secret, []byte("s"), 0o600)
				return []string{"server", "--backing", in.backing, "--cache-dir", in.cacheDir, "--capacity", "16Mi",
					"--secret-file", secret, "--mount-public-key", "bm90IGEga2V5"}
			},
			wantCode: 2, wantText: "public mount key is the base64 of 32 bytes",
		},
		"mount point beneath the backing directory": {
			prepare: func(t *testing.T, in instance) []string {
				mnt := filepath.Join(in.backing, "mnt")
				os.Mkdir(mnt, 0o755)
				return []string{"local", "up", "--backing", in.backing, "--mount", mnt, "--cache-dir", in.cacheDir, "--capacity", "64Mi"}
			},
			wantCode: 2, wantText: "overlap",
		},
		"mount point beneath the backing directory, through a symbolic link": {
			prepare: func(t *testing.T, in instance) []string {
				os.Mkdir(filepath.Join(in.backing, "mnt"), 0o755)
				link := filepath.Join(t.TempDir(), "link")
				os.Symlink(in.backing, link)
				return []string{"local", "up", "--backing", in.backing, "--mount", filepath.Join(link, "mnt"), "--cache-dir", in.cacheDir, "--capacity", "64Mi"}
			},
			wantCode: 2, wantText: "overlap",
		},
		"mount point over the backing directory": {
			prepare: func(t *testing.T, in instance) []string {
				return []string{"local", "up", "--backing", in.backing, "--mount", in.backing, "--cache-dir", in.cacheDir, "--capacity", "64Mi"}
			},
			wantCode: 2, wantText: "overlap",
		},
		"backing directory beneath the mount point": {
			prepare: func(t *testing.T, in instance) []string {
				data := filepath.Join(in.mount, "data")
				os.Mkdir(data, 0o755)
				return localUp(in, data)
			},
			wantCode: 2, wantText: "overlap",
		},
		"cache directory beneath the backing directory": {
			prepare: func(t *testing.T, in instance) []string {
				return []string{"local", "up", "--backing", in.backing, "--mount", in.mount, "--cache-dir", filepath.Join(in.backing, "cache"), "--capacity", "64Mi"}
			},
			wantCode: 2, wantText: "overlap",
		},
		"server with its cache directory beneath the backing directory": {
			prepare: func(t *testing.T, in instance) []string {
				return []string{"server", "--backing", in.backing, "--cache-dir", filepath.Join(in.backing, "cache"), "--capacity", "16Mi"}
			},
			wantCode: 2, wantText: "overlap",
		},
		"server with its backing directory beneath the cache directory, through a symbolic link": {
			prepare: func(t *testing.T, in instance) []string {
				data := filepath.Join(in.cacheDir, "data")
				os.MkdirAll(data, 0o755)
				link := filepath.Join(t.TempDir(), "pfs")
				os.Symlink(data, link)
				return []string{"server", "--backing", link, "--cache-dir", in.cacheDir, "--capacity", "16Mi"}
			},
			wantCode: 2, wantText: "overlap",
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
			r := burstcacheWithin(t, time.Minute, args...)
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

// TestServerOverACacheDirInUse: a server started over the cache directory
// of a server that runs (by hand, or a restart that overlaps the old
// process finishing its requests) must not open it: the two would hand out
// the same slots and overwrite each other's data. It waits for the running
// server to let go, then fails with exit code 3, and the running server
// keeps what it holds.
func TestServerOverACacheDirInUse(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1)
	data := bytes.Repeat([]byte("held by the running server "), 40000)
	if err := os.WriteFile(filepath.Join(in.mount, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(readState(t, in.cacheDir).Servers[0].Args)
	i := slices.Index(args, "--listen")
	if i < 0 {
		t.Fatalf("no --listen in the server's arguments %q", args)
	}
	args[i+1] = filepath.Join(t.TempDir(), "second.sock")
	r := burstcache(t, args...)
	if r.code != 3 || !strings.Contains(r.out, "in use by another process") {
		t.Fatalf("second server over the cache directory: exit %d, want 3 with \"in use by another process\":\n%s", r.code, r.out)
	}
	if got, err := os.ReadFile(filepath.Join(in.mount, "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading the file back through the mount: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	must(t, "local", "down", "--mount", in.mount)
	if got, err := os.ReadFile(filepath.Join(in.backing, "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("backing file after down: %d bytes, %v; want the %d written", len(got), err, len(data))
	}
}
