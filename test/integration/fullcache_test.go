package integration

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/test/smalldisk"
)

// TestTeardownCallsOnAFullCacheDisk fills the cache disk of a server
// process that holds dirty data, as other tenants of the node's SSD can:
// the calls of a teardown (flush, drain) must still be served, the data
// must reach the backing directory, and the calls, captured on their
// way, must be refused when sent again to the server restarted on the
// full disk. The server used to append a line to served-calls.log for
// each such call, and refused every one with 503 (EIO) while the disk was
// full: the teardown stalled until others made room.
func TestTeardownCallsOnAFullCacheDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system for the cache disk needs root")
	}
	srv := newHandServer(t)
	if err := os.Mkdir(srv.cacheDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", srv.cacheDir, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mounting a tmpfs for the cache disk: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(srv.cacheDir, unix.MNT_DETACH) })
	srv.start(t)
	data := randomBytes(3<<20, 7)
	writeDirty(t, srv, "out.dat", data)
	smalldisk.Fill(t, filepath.Join(srv.cacheDir, "other-files"))

	rec := &recorder{}
	ctl := control.NewClient(srv.control, srv.secret, &http.Client{Transport: rec, Timeout: time.Minute})
	ctx := context.Background()
	if res, err := ctl.Flush(ctx); err != nil || res.RemainingBytes != 0 {
		t.Fatalf("flush on a full cache disk: %+v, %v", res, err)
	}
	flush := rec.last()
	if res, err := ctl.Drain(ctx); err != nil || res.RemainingBytes != 0 {
		t.Fatalf("drain on a full cache disk: %+v, %v", res, err)
	}
	drain := rec.last()
	sameFile(t, filepath.Join(srv.backing, "out.dat"), data)

	srv.stop(t, syscall.SIGKILL)
	srv.start(t)
	for name, c := range map[string]capturedCall{"flush": flush, "drain": drain} {
		if status, body := c.sendTo(t, srv.control); status != http.StatusUnauthorized {
			t.Errorf("the %s sent again after a restart on the full disk: HTTP %d, want 401\n%s", name, status, body)
		}
	}
	if _, err := control.NewClient(srv.control, srv.secret, nil).Drain(ctx); err != nil {
		t.Errorf("a fresh drain after a restart on the full disk: %v", err)
	}
}

// writeDirty writes data to name through the server's data path, and
// leaves it dirty in the cache.
func writeDirty(t *testing.T, srv *handServer, name string, data []byte) {
	t.Helper()
	fs, err := client.New(client.Options{Servers: []string{srv.data}, Secret: srv.secret})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	ctx := context.Background()
	if _, err := fs.Create(ctx, name, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.WriteAt(ctx, name, data, 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(srv.backing, name)); err == nil && bytes.Equal(b, data) {
		t.Fatal("the data reached the backing directory at once: nothing is left to flush")
	}
}
