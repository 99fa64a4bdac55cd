package backing

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

var _ RangeCopier = (*Dir)(nil)

// CopyRange implements RangeCopier, as the identity in ctx. It copies with
// copy_file_range(2), which works within one file system, and otherwise
// with splice(2) through a pipe, which works across file systems: the
// pages of the backing file go into the pipe by reference, so either way
// the bytes are copied once, into dst.
func (d *Dir) CopyRange(ctx context.Context, p string, off int64, dst int, dstOff, n int64) (copied int64, err error) {
	err = d.with(ctx, p, unix.O_RDONLY, func(f *os.File) error {
		src := int(f.Fd())
		copied, err = copyFileRange(src, off, dst, dstOff, n)
		if copied == 0 && errors.Is(err, errors.ErrUnsupported) {
			copied, err = spliceRange(src, off, dst, dstOff, n)
		}
		if err != nil {
			return &fs.PathError{Op: "copy", Path: p, Err: err}
		}
		if copied == n && n >= readAheadMin {
			// As in ReadAt: the descriptor, and its read-ahead state,
			// dies with this call.
			_ = unix.Fadvise(src, off+n, n, unix.FADV_WILLNEED)
		}
		return nil
	})
	return copied, err
}

// unsupported wraps err in errors.ErrUnsupported when it is one of the
// errors the copy calls give for files they cannot copy between.
func unsupported(err error) error {
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}

// copyFileRange copies [off, off+n) of src into dst at dstOff with
// copy_file_range(2), until n bytes or the end of src.
func copyFileRange(src int, off int64, dst int, dstOff, n int64) (int64, error) {
	var copied int64
	for copied < n {
		m, err := unix.CopyFileRange(src, &off, dst, &dstOff, int(n-copied), 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return copied, fmt.Errorf("copy_file_range: %w", unsupported(err))
		case m == 0:
			return copied, nil
		}
		copied += int64(m)
	}
	return copied, nil
}

// pipeSize is the capacity asked for the pipe spliceRange copies through:
// a pipe holds 64 KiB by default, and every fill and drain is a system call.
const pipeSize = 1 << 20

// spliceRange copies [off, off+n) of src into dst at dstOff with splice(2)
// through a pipe, until n bytes or the end of src.
func spliceRange(src int, off int64, dst int, dstOff, n int64) (int64, error) {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		return 0, fmt.Errorf("pipe: %w", err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	// Best effort: an unprivileged process may be refused a larger pipe,
	// which only costs more system calls.
	_, _ = unix.FcntlInt(uintptr(pipe[1]), unix.F_SETPIPE_SZ, int(min(n, pipeSize)))
	var copied int64
	for copied < n {
		in, err := unix.Splice(src, &off, pipe[1], nil, int(n-copied), unix.SPLICE_F_MOVE)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return copied, fmt.Errorf("splice: %w", unsupported(err))
		case in == 0:
			return copied, nil
		}
		out, err := drainPipe(pipe[0], dst, &dstOff, in)
		copied += out
		if err != nil {
			return copied, err
		}
	}
	return copied, nil
}

// drainPipe moves n bytes from the pipe into dst at *dstOff.
func drainPipe(pipe, dst int, dstOff *int64, n int64) (int64, error) {
	var moved int64
	for moved < n {
		m, err := unix.Splice(pipe, nil, dst, dstOff, int(n-moved), unix.SPLICE_F_MOVE)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return moved, fmt.Errorf("splice: %w", unsupported(err))
		case m == 0:
			return moved, fmt.Errorf("splice: destination took no bytes: %w", unix.EIO)
		}
		moved += m
	}
	return moved, nil
}
