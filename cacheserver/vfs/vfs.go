package vfs

import (
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// FS is the part of a file system the cache engine uses for its directory.
type FS interface {
	// OpenFile opens name like os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// MkdirAll creates a directory and its parents like os.MkdirAll.
	MkdirAll(name string, perm fs.FileMode) error
	// Durable runs fn, a step that makes state durable outside of this FS
	// (the commit of an embedded database), as one durable step. An
	// implementation that has crashed returns an error without running fn.
	Durable(step string, fn func() error) error
}

// File is an open file of an FS. ReadAt and WriteAt follow io.ReaderAt and
// io.WriterAt; implementations must not retain p.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes every completed write of the file durable (fdatasync).
	Sync() error
	// Allocate reserves disk space for [off, off+n) like fallocate(2), so
	// that later writes there overwrite allocated blocks.
	Allocate(off, n int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
}

// DescriptorWriter is implemented by Files that let the kernel write into
// them directly, as splice(2) does, so that the bytes need not pass through
// user memory. A File that cannot offer its descriptor simply does
// not implement it; callers then write with WriteAt.
type DescriptorWriter interface {
	// WriteByDescriptor calls fn with the file's descriptor, for fn to write
	// into [off, off+n) of the file, and returns what fn returns. fn must not
	// write outside that range, nor retain or close the descriptor. To the
	// File it counts as a write of the whole range (a crash may undo it), so
	// bytes fn did not write must not be relied on.
	WriteByDescriptor(off, n int64, fn func(fd int) (int64, error)) (int64, error)
}

// Reserver is implemented by Files that can reserve disk space past their
// end without changing their size (fallocate(2) FALLOC_FL_KEEP_SIZE), for
// a file that another program grows, such as an embedded database.
type Reserver interface {
	// Reserve allocates the blocks of [off, off+n) that the file lacks,
	// keeping its size.
	Reserve(off, n int64) error
}

// Advisor is implemented by Files that can start reading a range into the
// page cache ahead of the reads that will want it (posix_fadvise(2)
// POSIX_FADV_WILLNEED). It is a hint: it must not block on the reads, and
// a File without a page cache simply does not implement it.
type Advisor interface {
	// WillNeed starts reading [off, off+n) of the file into memory.
	WillNeed(off, n int64)
}

// OS is the FS of the operating system.
type OS struct{}

// OpenFile implements FS.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// MkdirAll implements FS.
func (OS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }

// Durable implements FS by running fn.
func (OS) Durable(_ string, fn func() error) error { return fn() }

type osFile struct{ *os.File }

var (
	_ Reserver         = osFile{}
	_ Advisor          = osFile{}
	_ DescriptorWriter = osFile{}
	_ DescriptorWriter = (*crashFile)(nil)
)

func (f osFile) Sync() error { return unix.Fdatasync(int(f.Fd())) }

// WriteByDescriptor implements DescriptorWriter.
func (f osFile) WriteByDescriptor(_, _ int64, fn func(fd int) (int64, error)) (int64, error) {
	return fn(int(f.Fd()))
}

func (f osFile) Allocate(off, n int64) error {
	if err := unix.Fallocate(int(f.Fd()), 0, off, n); err != nil {
		return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// Reserve implements Reserver.
func (f osFile) Reserve(off, n int64) error {
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
		return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
