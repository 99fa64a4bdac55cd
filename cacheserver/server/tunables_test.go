package server_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// TestZeroTunablesLiftLimits sets a limit of one file on a server, then
// sends zero for it, as the operator does for a limit taken out of a
// spec, and checks that the limit is gone; a zero write-window length
// means the default too.
func TestZeroTunablesLiftLimits(t *testing.T) {
	data, _, _, s := startServer(t, "tcp", t.TempDir(), 0, 1, same, sameStore)
	f, err := client.New(client.Options{Servers: []string{data}, ExtentSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	one, zero := int64(1), int64(0)
	if err := s.SetTunables(ctx, control.Tunables{MaxFiles: &one}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, "a", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, "b", []byte("b"), 0); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("a second file with a limit of one: %v, want EDQUOT", err)
	}
	if err := s.SetTunables(ctx, control.Tunables{MaxFiles: &zero, WriteWindowSeconds: &zero}); err != nil {
		t.Fatalf("zero knobs: %v", err)
	}
	if _, err := f.WriteAt(ctx, "b", []byte("b"), 0); err != nil {
		t.Fatalf("a second file after the limit was lifted: %v", err)
	}
}
