package slab

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// ErrOutOfRange is returned for a slot number or an offset outside the slab.
var ErrOutOfRange = errors.New("slot access out of range")

// Slab is an open slab file. Its methods are safe for concurrent use on
// different slots; callers serialise access to one slot.
type Slab struct {
	f        vfs.File
	slotSize int64
	slots    int64
}

// Open opens or creates the slab file at path with slots slots of slotSize
// bytes, allocating its space.
func Open(fsys vfs.FS, path string, slotSize, slots int64) (*Slab, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening slab: %w", err)
	}
	// Allocating the space of a file that already has it is a no-op; a crash
	// during allocation leaves a file that the next Open allocates again.
	if err := f.Allocate(0, slotSize*slots); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("allocating slab %s: %w", path, err)
	}
	return &Slab{f: f, slotSize: slotSize, slots: slots}, nil
}

// SlotSize returns the size of a slot in bytes.
func (s *Slab) SlotSize() int64 { return s.slotSize }

// Slots returns the number of slots.
func (s *Slab) Slots() int64 { return s.slots }

func (s *Slab) check(slot int, n int, off int64) error {
	if slot < 0 || int64(slot) >= s.slots || off < 0 || off+int64(n) > s.slotSize {
		return fmt.Errorf("slot %d [%d,%d): %w", slot, off, off+int64(n), ErrOutOfRange)
	}
	return nil
}

// ReadAt fills p from offset off of slot.
func (s *Slab) ReadAt(slot int, p []byte, off int64) error {
	if err := s.check(slot, len(p), off); err != nil {
		return err
	}
	_, err := s.f.ReadAt(p, int64(slot)*s.slotSize+off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// WriteAt writes p at offset off of slot. The data is durable only after a
// later Sync.
func (s *Slab) WriteAt(slot int, p []byte, off int64) error {
	if err := s.check(slot, len(p), off); err != nil {
		return err
	}
	_, err := s.f.WriteAt(p, int64(slot)*s.slotSize+off)
	return err
}

// WriteByDescriptor lets fn write [off, off+n) of slot through the slab
// file's descriptor, for a copy the kernel makes (splice(2)); fn gets the
// descriptor and the file offset of off, and must write nowhere else. It returns what fn returns, or an error wrapping
// errors.ErrUnsupported, without calling fn, when the slab's file offers no
// descriptor. Like WriteAt, the data is durable only after a later Sync.
func (s *Slab) WriteByDescriptor(slot int, off, n int64, fn func(fd int, fileOff int64) (int64, error)) (int64, error) {
	if err := s.check(slot, int(n), off); err != nil {
		return 0, err
	}
	dw, ok := s.f.(vfs.DescriptorWriter)
	if !ok {
		return 0, fmt.Errorf("slab file has no descriptor: %w", errors.ErrUnsupported)
	}
	at := int64(slot)*s.slotSize + off
	return dw.WriteByDescriptor(at, n, func(fd int) (int64, error) { return fn(fd, at) })
}

// WillNeed starts reading count slots from first into the page cache, for
// a reader expected to want them soon; it returns without waiting. On a
// slab file that offers no read-ahead it does nothing.
func (s *Slab) WillNeed(first, count int) {
	if a, ok := s.f.(vfs.Advisor); ok && count > 0 && s.check(first, 0, 0) == nil && s.check(first+count-1, 0, 0) == nil {
		a.WillNeed(int64(first)*s.slotSize, int64(count)*s.slotSize)
	}
}

// WriteBehind starts writing slot to the disk and returns without waiting,
// so that the next Sync finds most of its pages there already instead of
// waiting for them all. It is a hint: the data is durable only after a
// Sync. On a slab file that offers no write-behind it does nothing.
func (s *Slab) WriteBehind(slot int) {
	if wb, ok := s.f.(vfs.WriteBehinder); ok && s.check(slot, 0, 0) == nil {
		wb.WriteBehind(int64(slot)*s.slotSize, s.slotSize)
	}
}

// Sync makes every completed write durable.
func (s *Slab) Sync() error { return s.f.Sync() }

// Close closes the slab file.
func (s *Slab) Close() error { return s.f.Close() }
