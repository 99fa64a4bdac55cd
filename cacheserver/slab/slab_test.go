package slab

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

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
