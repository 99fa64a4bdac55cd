package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/controllers/cacheinstance"
)

// TestServerStartsOnAClaimOfTheSizeTheOperatorAsks makes an ext4 file
// system of the size the operator asks for a server's cache claim, as a
// local volume provisioner that gives each claim what it asks (TopoLVM)
// does, and starts a server of that capacity on it as a user other than
// root, as server pods run. The server preallocates its capacity and the
// room of its index; what ext4 keeps for itself must not make it fail.
func TestServerStartsOnAClaimOfTheSizeTheOperatorAsks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a file system needs root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	for _, tc := range []struct{ capacity, extent int64 }{
		{64 << 20, 1 << 20}, {64 << 20, 4 << 10}, {1 << 30, 1 << 20},
	} {
		t.Run(fmt.Sprintf("%d bytes of %d-byte extents", tc.capacity, tc.extent), func(t *testing.T) {
			size := cacheinstance.CacheClaimSize(tc.capacity, tc.extent)
			dir := ext4Volume(t, size.Value())
			if err := os.Chown(dir, 1500, 1500); err != nil {
				t.Fatal(err)
			}
			backing := t.TempDir()
			if err := os.Chmod(filepath.Dir(backing), 0o755); err != nil {
				t.Fatal(err)
			}
			ready := filepath.Join(dir, "ready")
			cmd := exec.Command(bin, "server", "--backing", backing, "--cache-dir", dir,
				"--capacity", fmt.Sprint(tc.capacity), "--extent-size", fmt.Sprint(tc.extent),
				"--listen", "127.0.0.1:0", "--control", "127.0.0.1:0", "--ready-file", ready)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1500, Gid: 1500}}
			logFile := filepath.Join(t.TempDir(), "server.log")
			logw, err := os.Create(logFile)
			if err != nil {
				t.Fatal(err)
			}
			defer logw.Close()
			cmd.Stdout, cmd.Stderr = logw, logw
			out := func() string { b, _ := os.ReadFile(logFile); return string(b) }
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-exited
			}()
			deadline := time.After(30 * time.Second)
			for {
				if _, err := os.Stat(ready); err == nil {
					return
				}
				select {
				case err := <-exited:
					exited <- err
					t.Fatalf("server on a claim of %s: %v\n%s", size.String(), err, out())
				case <-deadline:
					t.Fatalf("server on a claim of %s did not serve in 30s\n%s", size.String(), out())
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
}

// ext4Volume makes an ext4 file system of size bytes on a loop device,
// mounts it, and returns its root, which goes when the test ends.
func ext4Volume(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "volume.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v\n%s", err, out)
		}
	})
	return mnt
}
