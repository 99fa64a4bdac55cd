package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// TestSharedServersAdmitOnlyMountsWithTheMountKey: a server that acts as
// its callers believes the identity each request names, and the shared
// secret that the handshake proves is in a Secret that users of the
// instance's namespace may read. Given the public half of a mount key, the
// server must refuse a mount that holds the secret alone, with an error
// that says why and nothing left mounted, and serve a mount that signs with
// the key as before.
func TestSharedServersAdmitOnlyMountsWithTheMountKey(t *testing.T) {
	requireFUSE(t)
	priv, pub, err := control.NewMountKey()
	if err != nil {
		t.Fatal(err)
	}
	srv := newHandServers(t, [][]string{{"--act-as-caller", "--mount-public-key", pub}})[0]
	srv.start(t)
	root := filepath.Dir(srv.backing)
	secretFile, keyFile := filepath.Join(root, "secret"), filepath.Join(root, "mount.key")
	if err := os.WriteFile(keyFile, []byte(priv+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mnt := func(name string) string {
		mp := filepath.Join(root, name)
		if err := os.Mkdir(mp, 0o755); err != nil {
			t.Fatal(err)
		}
		return mp
	}

	bare := mnt("secret-only")
	// An admitted mount would serve in the foreground until stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "mount", "--servers", srv.data, "--secret-file", secretFile, bare).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		forceUnmount(bare)
		t.Errorf("a mount with the shared secret alone was admitted:\n%s", out)
	case !errors.As(err, &ee) || ee.ExitCode() != 5 || !strings.Contains(string(out), "admits only mounts"):
		t.Errorf("a mount with the shared secret alone: %v, want exit 5 saying the server admits only mounts:\n%s", err, out)
	case isMounted(t, bare):
		t.Errorf("the refused mount left %s mounted", bare)
	}

	mp := mountByHand(t, mnt("with-key"), "--servers", srv.data, "--secret-file", secretFile, "--mount-key-file", keyFile)
	if err := os.WriteFile(filepath.Join(mp, "f"), []byte("through the mount"), 0o644); err != nil {
		t.Fatalf("writing through the mount that signs with the key: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(mp, "f")); err != nil || string(b) != "through the mount" {
		t.Fatalf("reading back through the mount: %q, %v", b, err)
	}
}
