package server_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// replaceBackingFile replaces the backing file name with a new file of
// data, as a job on the backing store does: written under another name
// and renamed over it.
func replaceBackingFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// recreateBackingFile removes the backing file name and creates a new one
// of data: ext4 gives it the inode number of the removed one, and another
// generation.
func recreateBackingFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	writeBackingFile(t, dir, name, data)
}

// TestOpenAfterAReplacementReadsTheNewFile reads a file through servers
// that cache it, replaces it on the backing store, and opens and reads it
// again without an invalidation: the new bytes, through the socket and
// through the slab of a server on the same machine.
func TestOpenAfterAReplacementReadsTheNewFile(t *testing.T) {
	replacements := map[string]func(t *testing.T, dir, name string, data []byte){
		"renamed over":              replaceBackingFile,
		"removed and created again": recreateBackingFile,
	}
	for how, replace := range replacements {
		for _, network := range []string{"tcp", "unix"} {
			t.Run(how+"/"+network, func(t *testing.T) {
				backingDir := t.TempDir()
				data, _, _ := startOn(t, network, backingDir, 2, same)
				f, err := client.New(client.Options{Servers: data, ExtentSize: 1 << 16})
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				writeBackingFile(t, backingDir, "f", fill('o', 3<<16))
				openAndExpect(t, f, "f", fill('o', 3<<16))
				replace(t, backingDir, "f", fill('n', 3<<16+5))
				openAndExpect(t, f, "f", fill('n', 3<<16+5))

				// A write through an open of the new file lands in its bytes,
				// not in those the old file left cached.
				replace(t, backingDir, "f", fill('m', 3<<16))
				ctx := context.Background()
				if _, err := f.Open(ctx, "f", syscall.O_RDWR); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(ctx, "f", fill('w', 10), 100); err != nil {
					t.Fatal(err)
				}
				f.Released("f")
				want := fill('m', 3<<16)
				copy(want[100:], fill('w', 10))
				openAndExpect(t, f, "f", want)
			})
		}
	}
}

// openAndExpect opens p through f and reads it whole, as a process does
// through a mount.
func openAndExpect(t *testing.T, f *client.FS, p string, want []byte) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.Open(ctx, p, syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	defer f.Released(p)
	got := make([]byte, len(want)+10)
	n, _ := f.ReadAt(ctx, p, got, 0)
	if !bytes.Equal(got[:n], want) {
		t.Fatalf("read %d bytes starting %q, want %d of %q", n, got[:min(n, 1)], len(want), want[:1])
	}
}

// TestReadsOfEarlierReleasesAreServedAsBefore reads a replaced file with
// OpRead as a client of an earlier release sends it, without the backing
// file's inode number: the server serves what it holds, as before; the
// same read naming the new file reads it.
func TestReadsOfEarlierReleasesAreServedAsBefore(t *testing.T) {
	backingDir := t.TempDir()
	data, _, _ := startOn(t, "tcp", backingDir, 1, same)
	writeBackingFile(t, backingDir, "f", fill('o', 100))
	c := wire.NewClient(data[0], wire.ClientOptions{})
	defer c.Close()
	read := func(ino uint64) []byte {
		t.Helper()
		args := (&wire.Encoder{}).String("f").Int64(0).Uint32(100)
		if ino != 0 {
			args.Uint64(ino).Int64(0).Uint32(0)
		}
		dst := make([]byte, 100)
		rep, err := c.Do(context.Background(), &wire.Call{Op: wire.OpRead, Cred: ident.Process(), Args: args.Bytes(), Dst: dst})
		if err != nil {
			t.Fatal(err)
		}
		return dst[:rep.N]
	}
	if got := read(0); !bytes.Equal(got, fill('o', 100)) {
		t.Fatalf("first read: %q", got)
	}
	replaceBackingFile(t, backingDir, "f", fill('n', 100))
	if got := read(0); !bytes.Equal(got, fill('o', 100)) {
		t.Fatalf("read of an earlier release after the replacement: %q, want the cached bytes", got)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(backingDir, "f"), &st); err != nil {
		t.Fatal(err)
	}
	if got := read(st.Ino); !bytes.Equal(got, fill('n', 100)) {
		t.Fatalf("read naming the new file: %q", got)
	}
}
