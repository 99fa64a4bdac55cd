package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
)

func TestClaimCacheDir(t *testing.T) {
	mine := server.Identity{Instance: "a", Index: 1, Servers: 3, ExtentSize: 1 << 20}
	tests := map[string]struct {
		existing *server.Identity
		garbage  bool
		wantErr  error
	}{
		"new directory":       {},
		"same server again":   {existing: &mine},
		"another instance":    {existing: &server.Identity{Instance: "b", Index: 1, Servers: 3, ExtentSize: 1 << 20}, wantErr: server.ErrForeignCacheDir},
		"another index":       {existing: &server.Identity{Instance: "a", Index: 2, Servers: 3, ExtentSize: 1 << 20}, wantErr: server.ErrForeignCacheDir},
		"another extent size": {existing: &server.Identity{Instance: "a", Index: 1, Servers: 3, ExtentSize: 4096}, wantErr: server.ErrForeignCacheDir},
		"unreadable record":   {garbage: true, wantErr: server.ErrForeignCacheDir},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cache")
			if tc.existing != nil {
				if _, err := server.ClaimCacheDir(dir, *tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			if tc.garbage {
				os.MkdirAll(dir, 0o700)
				os.WriteFile(filepath.Join(dir, "server.json"), []byte("{"), 0o600)
			}
			got, err := server.ClaimCacheDir(dir, mine)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("ClaimCacheDir: %v, want %v", err, tc.wantErr)
			}
			if err == nil && got != filepath.Join(dir, "extents") {
				t.Errorf("engine directory = %q", got)
			}
		})
	}
}

func TestDrainRefusesWritesAndFlushes(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: 4096})
	f, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if _, err := f.Create(ctx, "a", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, "a", []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	ctl := control.NewClient(in.Control[0], nil, nil)
	st, err := ctl.Stats(ctx)
	if err != nil || st.DirtyBytes != 5 || st.Server.Instance != "test" {
		t.Fatalf("Stats = %+v, %v; want 5 dirty bytes of instance test", st, err)
	}
	res, err := ctl.Drain(ctx)
	if err != nil || res.RemainingBytes != 0 {
		t.Fatalf("Drain = %+v, %v", res, err)
	}
	if data, _ := os.ReadFile(filepath.Join(in.Backing, "a")); string(data) != "hello" {
		t.Errorf("backing file after drain = %q", data)
	}
	if _, err := f.WriteAt(ctx, "a", []byte("more"), 5); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write after drain: %v, want EROFS", err)
	}
	if st, _ := ctl.Stats(ctx); !st.Server.Draining {
		t.Errorf("Stats after drain does not say draining")
	}
}

// TestGetAttrCountsCachedSize checks that the metadata server reports the
// size the cache knows, past the end of the backing file.
func TestGetAttrCountsCachedSize(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: 4096})
	f, _ := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
	defer f.Close()
	ctx := context.Background()
	f.Create(ctx, "a", os.O_RDWR|os.O_CREATE, 0o644)
	if _, err := f.WriteAt(ctx, "a", make([]byte, 10000), 0); err != nil {
		t.Fatal(err)
	}
	other, _ := client.New(client.Options{Servers: in.Data, ExtentSize: 4096})
	defer other.Close()
	a, err := other.GetAttr(ctx, "a")
	if err != nil || a.Size != 10000 {
		t.Errorf("GetAttr size = %d, %v; want 10000", a.Size, err)
	}
	if fi, _ := os.Stat(filepath.Join(in.Backing, "a")); fi.Size() != 0 {
		t.Errorf("backing file has %d bytes before write-back", fi.Size())
	}
}
