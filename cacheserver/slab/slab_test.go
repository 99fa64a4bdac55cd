package slab

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

func TestSlotsAreIndependentAndBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slab")
	s, err := Open(vfs.OS{}, path, 4096, 4)
	if err != nil {
		t.Fatal(err)
	}
	for slot := range 4 {
		if err := s.WriteAt(slot, bytes.Repeat([]byte{byte(slot + 1)}, 4096), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(vfs.OS{}, path, 4096, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := make([]byte, 100)
	if err := s.ReadAt(2, b, 4000-100); err != nil || !bytes.Equal(b, bytes.Repeat([]byte{3}, 100)) {
		t.Fatalf("slot 2: %v %v", b[:4], err)
	}
	for name, op := range map[string]func() error{
		"slot past the end":   func() error { return s.ReadAt(4, b, 0) },
		"range past the slot": func() error { return s.WriteAt(0, b, 4000) },
		"negative offset":     func() error { return s.ReadAt(0, b, -1) },
	} {
		if err := op(); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("%s: %v, want ErrOutOfRange", name, err)
		}
	}
}

// TestWriteByDescriptorTargetsTheSlot lets a kernel-style writer write
// through the descriptor at the offset it is given, and checks that the
// bytes land in the slot, that ranges are bounded, and that a file without
// a descriptor is refused with errors.ErrUnsupported.
func TestWriteByDescriptorTargetsTheSlot(t *testing.T) {
	s, err := Open(vfs.OS{}, filepath.Join(t.TempDir(), "slab"), 4096, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := bytes.Repeat([]byte{7}, 1000)
	n, err := s.WriteByDescriptor(2, 100, 1000, func(fd int, at int64) (int64, error) {
		m, err := unix.Pwrite(fd, data, at)
		return int64(m), err
	})
	if n != 1000 || err != nil {
		t.Fatalf("WriteByDescriptor = %d, %v", n, err)
	}
	got := make([]byte, 1000)
	if err := s.ReadAt(2, got, 100); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("slot 2 after the write: %v, %v", got[:4], err)
	}
	never := func(int, int64) (int64, error) { t.Fatal("fn called"); return 0, nil }
	if _, err := s.WriteByDescriptor(2, 4000, 1000, never); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("range past the slot: %v, want ErrOutOfRange", err)
	}
	plain, err := Open(noDescriptorFS{}, filepath.Join(t.TempDir(), "slab"), 4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.WriteByDescriptor(0, 0, 10, never); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("file without a descriptor: %v, want ErrUnsupported", err)
	}
}

// noDescriptorFS opens files that offer no descriptor.
type noDescriptorFS struct{ vfs.OS }

func (noDescriptorFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := vfs.OS{}.OpenFile(name, flag, perm)
	return struct{ vfs.File }{f}, err
}
