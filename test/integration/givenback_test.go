package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// TestDownGivesAFileHiddenForAFailedRenameItsNameBack does what a mount
// does before a rename of g over f, which it has open: it notes the hidden
// name it is about to give f, with the rename, and moves f to it. Then it
// stops, as a mount whose rename a server crash failed, and that ended
// before the server was back to give f its name back. Down must give f
// its name back, with its data, say so, and leave g alone. The servers'
// own client stands in for the mount: no test can have a server die
// between two calls of one rename.
func TestDownGivesAFileHiddenForAFailedRenameItsNameBack(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	data := randomBytes(3<<20, 9)
	if err := os.WriteFile(filepath.Join(in.mount, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in.mount, "g"), []byte("g"), 0o644); err != nil {
		t.Fatal(err)
	}
	var g syscall.Stat_t
	if err := syscall.Stat(filepath.Join(in.mount, "g"), &g); err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(filepath.Join(in.cacheDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, s := range readState(t, in.cacheDir).Servers {
		servers = append(servers, s.Data)
	}
	c, err := client.New(client.Options{Servers: servers, Secret: bytes.TrimSpace(secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const hidden = ".burstcache-open-f"
	if err := c.NoteHidden(ctx, hidden, namespace.Hiding{Name: "f", Source: "g", SourceIno: g.Ino}); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "f", hidden, 0); err != nil {
		t.Fatal(err)
	}
	r := burstcache(t, "local", "down", "--mount", in.mount)
	if r.code != 0 {
		t.Fatalf("down: exit %d:\n%s", r.code, r.out)
	}
	if want := filepath.Join(in.backing, "f") + " was given its name back"; !strings.Contains(r.out, want) {
		t.Errorf("down said:\n%s\nwant a line with %q", r.out, want)
	}
	sameFile(t, filepath.Join(in.backing, "f"), data)
	sameFile(t, filepath.Join(in.backing, "g"), []byte("g"))
	if _, err := os.Stat(filepath.Join(in.backing, hidden)); !os.IsNotExist(err) {
		t.Errorf("the hidden name is still there after down: %v", err)
	}
}
