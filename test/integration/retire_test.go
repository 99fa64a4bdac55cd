package integration

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/server"
)

// slabOf returns the slab file of server i of a local instance.
func slabOf(in instance, i int) string {
	return filepath.Join(in.cacheDir, "server-"+string(rune('0'+i)), "extents", "slab")
}

func drain(t *testing.T, in instance, addr string) int {
	t.Helper()
	code, _ := post(t, in, addr, "drain")
	return code
}

// post calls op of the control API of a server of the instance, with the
// instance's secret, and returns the HTTP status and the error.
func post(t *testing.T, in instance, addr, op string) (int, string) {
	t.Helper()
	secret, err := os.ReadFile(filepath.Join(in.cacheDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	ctl := control.NewClient(addr, bytes.TrimSpace(secret), nil)
	ctx := context.Background()
	switch op {
	case "drain":
		_, err = ctl.Drain(ctx)
	case "flush":
		_, err = ctl.Flush(ctx)
	case "discard":
		err = ctl.Discard(ctx)
	default:
		t.Fatalf("no control call %q", op)
	}
	var ce *control.Error
	switch {
	case err == nil:
		return http.StatusOK, ""
	case errors.As(err, &ce):
		return ce.Status, ce.Error()
	}
	t.Fatal(err)
	return 0, ""
}

func stop(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

// TestDrainedServerRemovesItsCacheFiles stops servers with SIGTERM, as
// Kubernetes stops a pod. One that holds dirty data keeps its cache files,
// for a restart to recover them, and so does one that holds none but was
// not drained (its cache stays warm); one that was drained (the teardown of an
// instance drains its servers) and holds nothing dirty removes them, so
// that they do not keep their preallocated space on the node.
func TestDrainedServerRemovesItsCacheFiles(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 1, holdDirty...)
	data := randomBytes(3<<20, 4)
	writeSynced(t, filepath.Join(in.mount, "ckpt"), data)

	st := readState(t, in.cacheDir)
	stop(t, st.Servers[0].PID)
	if _, err := os.Stat(slabOf(in, 0)); err != nil {
		t.Fatalf("a server stopped with dirty data lost its slab: %v", err)
	}
	restart := func() {
		must(t, upArgs(in, 1)...)
	}
	restart()
	sameFile(t, filepath.Join(in.mount, "ckpt"), data)

	// Clean but not drained, as after a flush: the cache stays warm.
	must(t, "local", "flush", "--mount", in.mount, in.mount)
	stop(t, readState(t, in.cacheDir).Servers[0].PID)
	if _, err := os.Stat(slabOf(in, 0)); err != nil {
		t.Fatalf("a server stopped clean but not drained lost its slab: %v", err)
	}
	restart()

	st = readState(t, in.cacheDir)
	if code := drain(t, in, st.Servers[0].Control); code != http.StatusOK {
		t.Fatalf("drain: HTTP %d", code)
	}
	sameFile(t, filepath.Join(in.backing, "ckpt"), data)
	stop(t, st.Servers[0].PID)
	if _, err := os.Stat(filepath.Dir(slabOf(in, 0))); !os.IsNotExist(err) {
		t.Fatalf("a drained server with nothing dirty kept its cache files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(in.cacheDir, "server-0", server.HiddenNamesFile)); !os.IsNotExist(err) {
		t.Fatalf("a drained server with nothing dirty kept its log of hidden names: %v", err)
	}
}

// TestDrainedServerWithDirtyDataKeepsItsCacheFiles drains a server whose
// write-back cannot finish and stops it: its cache files stay.
func TestDrainedServerWithDirtyDataKeepsItsCacheFiles(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	upWithUnwritableResult(t, in, 1, randomBytes(2<<20, 3))
	st := readState(t, in.cacheDir)
	if code := drain(t, in, st.Servers[0].Control); code == http.StatusOK {
		t.Fatal("drain succeeded although write-back cannot")
	}
	stop(t, st.Servers[0].PID)
	if _, err := os.Stat(slabOf(in, 0)); err != nil {
		t.Fatalf("a drained server with dirty data lost its slab: %v", err)
	}
	os.Chown(filepath.Join(in.backing, "result"), 1000, 1000)
}

// TestDiscardedServerRemovesItsCacheFiles tells a server whose write-back
// cannot finish to discard, as the teardown of an instance with
// teardown.policy Discard does, and stops it: its cache files go, dirty data
// included, instead of keeping their space on the node for good. Before
// the discard, the same stop keeps them.
func TestDiscardedServerRemovesItsCacheFiles(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	upWithUnwritableResult(t, in, 1, randomBytes(2<<20, 5))
	defer os.Chown(filepath.Join(in.backing, "result"), 1000, 1000)
	stop(t, readState(t, in.cacheDir).Servers[0].PID)
	if _, err := os.Stat(slabOf(in, 0)); err != nil {
		t.Fatalf("a server stopped with dirty data before any discard lost its slab: %v", err)
	}
	must(t, upArgs(in, 1)...)

	st := readState(t, in.cacheDir)
	if code, _ := post(t, in, st.Servers[0].Control, "discard"); code != http.StatusOK {
		t.Fatalf("discard: HTTP %d", code)
	}
	if err := os.WriteFile(filepath.Join(in.mount, "late"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a write after the discard: %v, want EROFS", err)
	}
	stop(t, st.Servers[0].PID)
	if _, err := os.Stat(filepath.Dir(slabOf(in, 0))); !os.IsNotExist(err) {
		t.Fatalf("a discarded server kept its cache files: %v", err)
	}
}
