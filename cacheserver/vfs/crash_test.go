package vfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCrashLosesOnlyUnsyncedWrites(t *testing.T) {
	for seed := range uint64(20) {
		path := filepath.Join(t.TempDir(), "f")
		c := NewCrashable(OS{}, seed)
		f, err := c.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		synced := bytes.Repeat([]byte{1}, 8192)
		f.WriteAt(synced, 0)
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.WriteAt(bytes.Repeat([]byte{2}, 4096), 0)
		f.WriteAt(bytes.Repeat([]byte{3}, 4096), 2048)
		c.Crash()
		if _, err := f.WriteAt([]byte{9}, 0); !errors.Is(err, ErrCrashed) {
			t.Fatalf("write after crash: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil || len(got) != 8192 {
			t.Fatalf("after crash: %d bytes, %v", len(got), err)
		}
		for i, b := range got {
			ok := b == 1 || (i < 4096 && b == 2) || (i >= 2048 && i < 6144 && b == 3)
			if !ok {
				t.Fatalf("seed %d: byte %d = %d, which no write put there", seed, i, b)
			}
		}
	}
}

func TestCrashAtStepStopsDurableSteps(t *testing.T) {
	c := NewCrashable(OS{}, 1)
	c.CrashAtStep(2)
	ran := 0
	step := func() error { ran++; return nil }
	if err := c.Durable("one", step); err != nil {
		t.Fatal(err)
	}
	if err := c.Durable("two", step); !errors.Is(err, ErrCrashed) {
		t.Fatalf("second step: %v", err)
	}
	if ran != 1 || !c.Crashed() || c.Steps() != 2 {
		t.Fatalf("ran %d, crashed %v, steps %d", ran, c.Crashed(), c.Steps())
	}
}

// TestCrashUndoesWritesByDescriptor checks that a crash can undo bytes the
// kernel wrote through the descriptor, as it undoes WriteAt.
func TestCrashUndoesWritesByDescriptor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	undone := false
	for seed := uint64(0); seed < 20 && !undone; seed++ {
		c := NewCrashable(OS{}, seed)
		f, err := c.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(bytes.Repeat([]byte{1}, 4096), 0); err != nil || f.Sync() != nil {
			t.Fatal("writing the synced content", err)
		}
		dw, ok := f.(DescriptorWriter)
		if !ok {
			t.Fatal("a crashable file over OS offers no descriptor")
		}
		if _, err := dw.WriteByDescriptor(1024, 1024, func(fd int) (int64, error) {
			n, err := unix.Pwrite(fd, bytes.Repeat([]byte{2}, 1024), 1024)
			return int64(n), err
		}); err != nil {
			t.Fatal(err)
		}
		c.Crash()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		undone = bytes.Equal(got, bytes.Repeat([]byte{1}, 4096))
		f.Close()
	}
	if !undone {
		t.Fatal("no crash in 20 seeds undid a write made through the descriptor")
	}
}
