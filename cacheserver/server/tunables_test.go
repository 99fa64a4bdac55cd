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
	create := syscall.O_WRONLY | syscall.O_CREAT
	if _, err := f.Create(ctx, "b", create, 0o644); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("a second file with a limit of one: %v, want EDQUOT", err)
	}
	if err := s.SetTunables(ctx, control.Tunables{MaxFiles: &zero, WriteWindowSeconds: &zero}); err != nil {
		t.Fatalf("zero knobs: %v", err)
	}
	if _, err := f.Create(ctx, "b", create, 0o644); err != nil {
		t.Fatalf("a second file after the limit was lifted: %v", err)
	}
}

// TestWriteOpensMeetTheCacheLimits checks that an open for writing fails as
// a write would: with EDQUOT for a create past the limit on files, leaving
// no file behind, and with EROFS while the write window is used up, while
// opens of files the cache holds and opens for reading go on. A mount with
// the client cache sends a job's writes only when its kernel writes the
// pages back, which pass the limits, so the open is where the job learns
// of them.
func TestWriteOpensMeetTheCacheLimits(t *testing.T) {
	backingDir := t.TempDir()
	data, _, _, s := startServer(t, "tcp", backingDir, 0, 1, same, sameStore)
	f, err := client.New(client.Options{Servers: []string{data}, ExtentSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	one, zero, quarter := int64(1), int64(0), 0.25
	if err := s.SetTunables(ctx, control.Tunables{MaxFiles: &one}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(ctx, "a", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backingDir, "pre"), []byte("pre"), 0o644); err != nil {
		t.Fatal(err)
	}
	wr, rd := syscall.O_WRONLY|syscall.O_CREAT, syscall.O_RDONLY|syscall.O_CREAT
	steps := []struct {
		what string
		call func() error
		want error
	}{
		{"create past MaxFiles", func() error { _, err := f.Create(ctx, "b", wr, 0o644); return err }, syscall.EDQUOT},
		{"create of a held file at MaxFiles", func() error { _, err := f.Create(ctx, "a", wr, 0o644); return err }, nil},
		{"exclusive create of a held file", func() error { _, err := f.Create(ctx, "a", wr|syscall.O_EXCL, 0o644); return err }, syscall.EEXIST},
		{"create of a file the cache does not hold at MaxFiles", func() error { _, err := f.Create(ctx, "pre", rd, 0o644); return err }, nil},
		{"exclusive create of it, truncating", func() error {
			_, err := f.Create(ctx, "pre", wr|syscall.O_EXCL|syscall.O_TRUNC, 0o644)
			return err
		}, syscall.EEXIST},
		{"reading what the exclusive create left", func() error {
			if b, err := os.ReadFile(filepath.Join(backingDir, "pre")); err != nil || string(b) != "pre" {
				return fmt.Errorf("backing file holds %q, %w; want it untouched", b, err)
			}
			return nil
		}, nil},
		{"lifting MaxFiles, using up the window", func() error {
			return errors.Join(s.SetTunables(ctx, control.Tunables{MaxFiles: &zero, WriteWindowMultiplier: &quarter}),
				writeAll(ctx, f, "a", 1<<20))
		}, nil},
		{"open for writing", func() error { _, err := f.Open(ctx, "a", syscall.O_RDWR); return err }, syscall.EROFS},
		{"open to truncate", func() error { _, err := f.Open(ctx, "a", syscall.O_RDONLY|syscall.O_TRUNC); return err }, syscall.EROFS},
		{"create", func() error { _, err := f.Create(ctx, "c", rd, 0o644); return err }, syscall.EROFS},
		{"create of an existing file for writing", func() error { _, err := f.Create(ctx, "a", wr, 0o644); return err }, syscall.EROFS},
		{"create of an existing file for reading", func() error { _, err := f.Create(ctx, "a", rd, 0o644); return err }, nil},
		{"open for reading", func() error { _, err := f.Open(ctx, "a", syscall.O_RDONLY); return err }, nil},
	}
	for _, st := range steps {
		if err := st.call(); !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", st.what, err, st.want)
		}
	}
	for _, name := range []string{"b", "c"} {
		if _, err := os.Stat(filepath.Join(backingDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("refused create left %s on the backing directory: %v", name, err)
		}
	}
}

// writeAll writes n bytes to p in extents of 64 KiB.
func writeAll(ctx context.Context, f *client.FS, p string, n int) error {
	for off := 0; off < n; off += 1 << 16 {
		if _, err := f.WriteAt(ctx, p, make([]byte, 1<<16), int64(off)); err != nil {
			return err
		}
	}
	return nil
}
