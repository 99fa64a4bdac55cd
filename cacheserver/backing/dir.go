package backing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// Dir is a Store over a local or mounted POSIX directory. Every path is
// resolved beneath the directory, as the identity the context carries.
type Dir struct {
	root string
	// privileged says the process may open files with its own rights, for
	// an owner refused by its file's mode (see openOwned).
	privileged bool
	// pin is the directory the Dir serves, if OpenDir pinned one.
	pin *pinnedDir
}

var _ Store = (*Dir)(nil)

// NewDir returns a Store over the directory root, whatever root names at
// each call; it is made if it is missing when a file is written.
func NewDir(root string) *Dir { return &Dir{root: root, privileged: os.Geteuid() == 0} }

// ReadAt implements Store.
func (d *Dir) ReadAt(ctx context.Context, p string, b []byte, off int64) (n int, err error) {
	err = d.with(ctx, p, unix.O_RDONLY, func(f *os.File) error {
		n, err = f.ReadAt(b, off)
		if n == len(b) && n >= readAheadMin {
			// Each call opens the file anew, which loses the kernel's
			// sequential read-ahead state: ask for the next range now, so
			// that a sequential reader finds it in memory.
			unix.Fadvise(int(f.Fd()), off+int64(n), int64(n), unix.FADV_WILLNEED)
		}
		return err
	})
	return n, err
}

// readAheadMin is the smallest read that triggers read-ahead of the next
// range of the same size.
const readAheadMin = 256 << 10

// WriteAt implements Store.
func (d *Dir) WriteAt(ctx context.Context, p string, b []byte, off int64) (n int, err error) {
	err = d.with(ctx, p, unix.O_WRONLY|unix.O_CREAT, func(f *os.File) error {
		n, err = f.WriteAt(b, off)
		return err
	})
	return n, err
}

// with runs fn on p opened with flags as the identity in ctx; O_CREAT also
// creates missing parents. A file's owner refused by the file's mode gets
// the file opened all the same (openOwned), as POSIX lets a process keep
// using a descriptor after its file lost the permission; so does a reader
// that may execute the file, for a privileged Dir (see usableByCaller).
func (d *Dir) with(ctx context.Context, p string, flags int, fn func(*os.File) error) error {
	var owned *unix.Stat_t
	err := ident.DoContext(ctx, func() error {
		f, err := d.open(ctx, p, flags|unix.O_NOFOLLOW, createdFileMode, flags&unix.O_CREAT != 0)
		if errors.Is(err, fs.ErrPermission) {
			if st, ok := d.usableByCaller(ctx, p, flags); ok {
				owned = st
				return nil
			}
		}
		if err != nil {
			return err
		}
		return errors.Join(fn(f), f.Close())
	})
	if err != nil || owned == nil {
		return err
	}
	f, err := d.openOwnedAs(ctx, p, flags&^unix.O_CREAT, owned)
	if err != nil {
		return err
	}
	return errors.Join(fn(f), f.Close())
}

// usableByCaller returns the file p if it is a regular file that the
// identity in ctx owns or, to read it in a privileged Dir, may execute:
// the kernel reads a program it runs through the open that execve(2)
// made, which needed execute permission only. It runs as that identity.
func (d *Dir) usableByCaller(ctx context.Context, p string, flags int) (*unix.Stat_t, bool) {
	c, ok := ident.FromContext(ctx)
	if !ok {
		c = ident.Process()
	}
	h, err := d.open(ctx, p, unix.O_PATH|unix.O_NOFOLLOW, 0, false)
	if err != nil {
		return nil, false
	}
	defer h.Close()
	var st unix.Stat_t
	if unix.Fstat(int(h.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false
	}
	if st.Uid == c.UID {
		return &st, true
	}
	exec := d.privileged && flags&unix.O_ACCMODE == unix.O_RDONLY &&
		unix.Faccessat2(int(h.Fd()), "", unix.X_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH) == nil
	return &st, exec
}

func (d *Dir) openOwnedAs(ctx context.Context, p string, flags int, st *unix.Stat_t) (*os.File, error) {
	if d.privileged {
		return d.openOwned(ctx, p, flags, st, true)
	}
	var f *os.File
	err := ident.DoContext(ctx, func() (err error) {
		f, err = d.openOwned(ctx, p, flags, st, false)
		return err
	})
	return f, err
}

// Stat implements Store.
func (d *Dir) Stat(ctx context.Context, p string) (fi fs.FileInfo, err error) {
	err = ident.DoContext(ctx, func() error {
		f, err := d.open(ctx, p, unix.O_PATH, 0, false)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err = f.Stat()
		return err
	})
	return fi, err
}

// FileID implements Identifier, with statx(2) and, for a regular file the
// caller may read, FS_IOC_GETVERSION. The change time comes from the same
// statx, before anything is read: a change after it is a later one.
func (d *Dir) FileID(ctx context.Context, p string) (id FileID, err error) {
	err = ident.DoContext(ctx, func() error {
		f, err := d.open(ctx, p, unix.O_PATH, 0, false)
		if err != nil {
			return err
		}
		defer f.Close()
		var st unix.Statx_t
		if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME|unix.STATX_TYPE|unix.STATX_CTIME, &st); err != nil {
			return &fs.PathError{Op: "statx", Path: p, Err: err}
		}
		id.Ino = st.Ino
		if st.Mask&unix.STATX_BTIME != 0 {
			id.Birth = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
		}
		if st.Mask&unix.STATX_CTIME != 0 {
			id.Change = st.Ctime.Sec*1e9 + int64(st.Ctime.Nsec)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		// The generation needs a descriptor that is not O_PATH; a file
		// the caller may not read, or a file system without generations,
		// leaves it unknown.
		proc := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
		r, err := unix.Open(proc, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOATIME, 0)
		if errors.Is(err, unix.EPERM) {
			r, err = unix.Open(proc, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return nil
		}
		defer unix.Close(r)
		if gen, err := unix.IoctlGetUint32(r, fsIocGetVersion); err == nil {
			id.Gen = gen
		}
		return nil
	})
	return id, err
}

// Truncate implements Store.
func (d *Dir) Truncate(ctx context.Context, p string, size int64) error {
	return d.with(ctx, p, unix.O_WRONLY|unix.O_CREAT, func(f *os.File) error { return f.Truncate(size) })
}

// Sync implements Store.
func (d *Dir) Sync(ctx context.Context, p string) error {
	return d.with(ctx, p, unix.O_WRONLY, func(f *os.File) error { return f.Sync() })
}

// SyncDir implements Store. A directory that the identity in ctx may not
// read, but may have written a file into (a drop box of mode 0733), a
// privileged Dir opens with its own rights: an fsync changes nothing and
// tells nothing. One that neither may open (an unprivileged Dir, or root
// squashed by NFS) counts as done: the caller could not have fsynced it
// on the backing store either, and failing would keep the data of its
// files dirty for ever, holding up every flush and teardown. A file
// system that cannot fsync a directory (EINVAL, as fsync(2) says) has
// nothing more to make durable.
func (d *Dir) SyncDir(ctx context.Context, p string) error {
	err := ident.DoContext(ctx, func() error { return d.syncDir(ctx, p) })
	if errors.Is(err, fs.ErrPermission) && d.privileged {
		err = d.syncDir(context.Background(), p)
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil
	}
	return err
}

func (d *Dir) syncDir(ctx context.Context, p string) error {
	f, err := d.open(ctx, p, unix.O_RDONLY|unix.O_DIRECTORY, 0, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}

// Remove implements Store.
func (d *Dir) Remove(ctx context.Context, p string) error {
	return d.inParent(ctx, p, func(dirfd int, name string) error {
		err := unix.Unlinkat(dirfd, name, 0)
		if errors.Is(err, unix.EISDIR) {
			err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		}
		return err
	})
}

// Rename implements Store.
func (d *Dir) Rename(ctx context.Context, oldPath, newPath string) error {
	return d.inParent(ctx, oldPath, func(oldDir int, oldName string) error {
		return d.inParent(ctx, newPath, func(newDir int, newName string) error {
			return unix.Renameat(oldDir, oldName, newDir, newName)
		})
	})
}

// inParent runs fn on the directory holding p, opened beneath the root, and
// the last element of p.
func (d *Dir) inParent(ctx context.Context, p string, fn func(dirfd int, name string) error) error {
	return ident.DoContext(ctx, func() error {
		dir, err := d.open(ctx, path.Dir(p), unix.O_PATH|unix.O_DIRECTORY, 0, false)
		if err != nil {
			return err
		}
		defer dir.Close()
		if err := fn(int(dir.Fd()), path.Base(p)); err != nil {
			return &fs.PathError{Op: "at", Path: p, Err: err}
		}
		return nil
	})
}

// ReadDir implements Store.
func (d *Dir) ReadDir(ctx context.Context, p string) (es []fs.DirEntry, err error) {
	err = ident.DoContext(ctx, func() error {
		f, err := d.open(ctx, p, unix.O_RDONLY|unix.O_DIRECTORY, 0, false)
		if err != nil {
			return err
		}
		defer f.Close()
		es, err = f.ReadDir(-1)
		return err
	})
	return es, err
}

// ReadFull reads len(p) bytes at off or up to the end of the file, whichever
// comes first, and returns how many it read. Reaching the end of the file, or
// a file that does not exist, is not an error.
func ReadFull(ctx context.Context, s Store, p string, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := s.ReadAt(ctx, p, b[n:], off+int64(n))
		n += m
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, fs.ErrNotExist):
			return n, nil
		case err != nil:
			return n, err
		case m == 0:
			return n, nil
		}
	}
	return n, nil
}

// fsIocGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long), which answers
// an int however it is declared.
const fsIocGetVersion = 0x80087601
