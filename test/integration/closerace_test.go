package integration

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadsWhileOtherDescriptorsClose reads a file at random offsets, with
// O_DIRECT and through the page cache, while another descriptor rewrites
// blocks of it with the bytes they hold and a third opens and closes it
// over and over, as the jobs of fio or of a data loader do with a shared
// file. Each read lies inside the file and must return its bytes: a short
// read leaves an O_DIRECT reader with the stale bytes of its buffer, and
// makes the kernel believe the file ends there.
func TestReadsWhileOtherDescriptorsClose(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2)
	const size, block = 8 << 20, 4096
	p := filepath.Join(in.mount, "shared")
	want := randomBytes(size, 7)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	closer := make(chan error, 1)
	go func() {
		var err error
		for !stop.Load() && err == nil {
			var f *os.File
			if f, err = os.Open(p); err == nil {
				err = f.Close()
			}
		}
		closer <- err
	}()
	writer := make(chan error, 1)
	go func() { writer <- rewriteBlocks(p, want, block, &stop) }()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for r := range errs {
		wg.Go(func() { errs[r] = readBlocks(p, want, block, 1500, r%2 == 0) })
	}
	wg.Wait()
	stop.Store(true)
	if err := errors.Join(append(errs, <-closer, <-writer)...); err != nil {
		t.Fatal(err)
	}
}

// readBlocks reads n random blocks of path, whose bytes are want, with
// O_DIRECT if direct is set, and reports the first that was short or wrong.
func readBlocks(path string, want []byte, block, n int, direct bool) error {
	flags := os.O_RDONLY
	if direct {
		flags |= syscall.O_DIRECT
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// O_DIRECT needs a buffer aligned to the page: an anonymous mapping is.
	buf, err := unix.Mmap(-1, 0, block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	blocks := len(want) / block
	for range n {
		off := rand.IntN(blocks) * block
		clear(buf)
		got, err := f.ReadAt(buf, int64(off))
		if err != nil {
			return fmt.Errorf("read of %d bytes at %d (direct %v): %d bytes, %w", block, off, direct, got, err)
		}
		if !bytes.Equal(buf, want[off:off+block]) {
			return fmt.Errorf("read at %d (direct %v) returned other bytes", off, direct)
		}
	}
	return nil
}

// rewriteBlocks writes random blocks of path with the bytes want has for
// them, until stop.
func rewriteBlocks(path string, want []byte, block int, stop *atomic.Bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	blocks := len(want) / block
	for !stop.Load() {
		off := rand.IntN(blocks) * block
		if _, err := f.WriteAt(want[off:off+block], int64(off)); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
