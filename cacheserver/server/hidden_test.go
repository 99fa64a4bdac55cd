package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
)

// TestHiddenNamesLeftByDeadMountsAreRemoved hides two files as a mount does
// when they are unlinked while open: it notes each hidden name, then
// renames the file to it. One mount removes its hidden name at the last
// close, which takes the record along; the other dies first. The record of
// its name outlives a restart of the server, and a line torn by a crash
// after it. The teardown's RemoveHidden removes the name as the user that
// hid the file: while that user may not remove names in the directory, the
// name and its record stay, and the error says so. The directory has a
// Latin-1 name, which is no UTF-8: the record must name it byte for byte.
func TestHiddenNamesLeftByDeadMountsAreRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	backingDir, stateDir := t.TempDir(), t.TempDir()
	const uid, gid = 2000, 2000
	const d = "caf\xe9"
	dir := filepath.Join(backingDir, d)
	for _, d := range []string{filepath.Dir(backingDir), backingDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, backingDir, servertest.Options{Servers: 2, ExtentSize: 4096, ActAsCaller: true, StateDir: stateDir})
	f, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := ident.NewContext(context.Background(), ident.Cred{UID: uid, GID: gid})
	for _, name := range []string{"left", "closed", "kept"} {
		if _, err := f.Create(ctx, d+"/"+name, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(ctx, d+"/"+name, []byte("data of "+name), 0); err != nil {
			t.Fatal(err)
		}
		if name == "kept" {
			continue
		}
		hidden := d + "/.burstcache-open-" + name
		if err := f.NoteHidden(ctx, hidden); err != nil {
			t.Fatal(err)
		}
		if err := f.Rename(ctx, d+"/"+name, hidden, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Unlink(ctx, d+"/.burstcache-open-closed"); err != nil {
		t.Fatal(err)
	}
	recorded := func() (total int64, holder int) {
		t.Helper()
		for i, s := range in.Servers {
			st, err := s.Stats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.HiddenNames > 0 {
				holder = i
			}
			total += st.HiddenNames
		}
		return total, holder
	}
	total, holder := recorded()
	if total != 1 {
		t.Fatalf("servers record %d hidden names, want 1: the one whose mount did not remove it", total)
	}
	log := filepath.Join(stateDir, fmt.Sprintf("server-%d-%s", holder, server.HiddenNamesFile))
	lf, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lf.WriteString(`{"path":"d/.burstcache-open-torn","ui`); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	in.Restart(t, holder)
	if total, _ := recorded(); total != 1 {
		t.Fatalf("after a restart the servers record %d hidden names, want 1", total)
	}

	hiddenFile := filepath.Join(dir, ".burstcache-open-left")
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	n, err := in.Servers[holder].RemoveHidden(context.Background())
	if n != 0 || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("RemoveHidden in a directory the user may not change = %d, %v; want 0 and EACCES", n, err)
	}
	if _, err := os.Stat(hiddenFile); err != nil {
		t.Fatalf("the hidden name is gone after a refused removal: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range in.Servers {
		n, err := s.RemoveHidden(context.Background())
		if err != nil || n != map[bool]int{true: 1}[i == holder] {
			t.Fatalf("RemoveHidden on server %d = %d, %v", i, n, err)
		}
	}
	if _, err := os.Stat(hiddenFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hidden name left by a dead mount is still there: %v", err)
	}
	if total, _ := recorded(); total != 0 {
		t.Fatalf("servers still record %d hidden names", total)
	}
	if _, err := os.Stat(filepath.Join(dir, "kept")); err != nil {
		t.Fatalf("a file nobody hid went with the hidden names: %v", err)
	}
}
