package posixns

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// openFlags keeps the open(2) flags that matter for a check and a
// truncation; flags such as O_DIRECT or O_NOATIME would only make the open
// fail where the file system or the identity does not support them.
const openFlags = unix.O_ACCMODE | unix.O_TRUNC

// Create creates and opens the regular file p with mode, less the umask of
// the caller (see the package comment). With
// O_EXCL an existing p fails with EEXIST; without it an existing p is opened
// as Open would.
func (f *FS) Create(ctx context.Context, p string, flags int, mode uint32) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.creating(ctx, "create", p, func(dirfd int, name string) error {
		var err error
		for {
			a, err = createAt(dirfd, name, flags, mode)
			if !errors.Is(err, unix.EEXIST) || flags&unix.O_EXCL != 0 {
				return err
			}
			a, err = openAt(dirfd, name, flags)
			if !errors.Is(err, unix.ENOENT) {
				return err
			}
			// The file was removed between the two opens: create it again.
		}
	})
	return a, err
}

func createAt(dirfd int, name string, flags int, mode uint32) (namespace.Attr, error) {
	fl := uint64(flags&openFlags) | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	return statAt(dirfd, name, unix.OpenHow{Flags: fl, Mode: uint64(mode & 07777), Resolve: resolve}, nil)
}

// statAt opens name beneath dirfd as how says, runs check (if any) on the
// open file, and returns its attributes.
func statAt(dirfd int, name string, how unix.OpenHow, check func(fd int, st *unix.Stat_t) error) (namespace.Attr, error) {
	fd, err := unix.Openat2(dirfd, name, &how)
	if err != nil {
		return namespace.Attr{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return namespace.Attr{}, err
	}
	if check != nil {
		if err := check(fd, &st); err != nil {
			return namespace.Attr{}, err
		}
	}
	a := attrOf(&st)
	if how.Flags&unix.O_PATH == 0 && a.IsRegular() {
		a.Birth, a.Gen = identityOf(fd)
	}
	return a, nil
}

// identityOf returns the creation time and inode generation of the
// regular file open as fd (0 where the file system does not tell), which
// tell it apart from a file that replaced it under a reused inode number:
// two calls on the open descriptor, no lookup.
func identityOf(fd int) (birth int64, gen uint32) {
	var stx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &stx) == nil && stx.Mask&unix.STATX_BTIME != 0 {
		birth = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	}
	gen, _ = unix.IoctlGetUint32(fd, fsIocGetVersion)
	return birth, gen
}

// fsIocGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long), which answers
// a file's inode generation (as backing.Dir.FileID asks it).
const fsIocGetVersion = 0x80087601

// Open checks that the caller may open p with flags, and truncates it for
// O_TRUNC.
func (f *FS) Open(ctx context.Context, p string, flags int) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.at(ctx, "open", p, func(dirfd int, name string) (err error) {
		a, err = openAt(dirfd, name, flags)
		return err
	})
	return a, err
}

func openAt(dirfd int, name string, flags int) (namespace.Attr, error) {
	if flags&namespace.OpenExec != 0 {
		return openExecAt(dirfd, name)
	}
	fl := uint64(flags&openFlags) | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	return statAt(dirfd, name, unix.OpenHow{Flags: fl, Resolve: resolve}, nil)
}

// openExecAt checks that the caller may execute name as execve(2) checks
// it: a regular file with execute permission for the caller, on a file
// system not mounted noexec (faccessat2 checks both). Read permission is
// not needed, so the file is looked at through an O_PATH descriptor.
func openExecAt(dirfd int, name string) (namespace.Attr, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve}
	return statAt(dirfd, name, how, func(fd int, st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return unix.EACCES
		}
		return unix.Faccessat2(fd, "", unix.X_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH)
	})
}

// openData opens p for a data call as the caller. A file stays usable
// through a descriptor after its mode changes (a file created with mode 0444
// and O_RDWR can be written), so when the caller may look p up and owns it,
// and could therefore change its mode back anyway, a refused open is retried
// with the server's own identity; so is a read of a program the caller may
// execute (usableBy).
func (f *FS) openData(ctx context.Context, p string, flags uint64) (int, error) {
	if err := namespace.CheckPath(p); err != nil {
		return -1, err
	}
	fl := flags | unix.O_NOFOLLOW | unix.O_NONBLOCK
	var fd int
	var id fileID
	err := f.as(ctx, func() (err error) {
		fd, err = f.openat2(p, fl, 0)
		if errors.Is(err, unix.EACCES) {
			fd = -1
			id, err = f.usableBy(ctx, p, flags)
		}
		return err
	})
	if err != nil || fd >= 0 {
		return fd, err
	}
	return f.openOwned(p, fl, id)
}

// fileID names a file: its device and inode numbers.
type fileID struct{ dev, ino uint64 }

// usableBy returns the identity of p, looked up as the caller, and EACCES
// unless the caller owns it or, to read it, may execute it: the kernel
// reads a program it runs through the open that execve(2) made, which
// needed execute permission only (openExecAt).
func (f *FS) usableBy(ctx context.Context, p string, flags uint64) (fileID, error) {
	dir, name := split(p)
	dirfd, err := f.openDir(dir)
	if err != nil {
		return fileID{}, err
	}
	defer f.closeDir(dirfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileID{}, err
	}
	id := fileID{dev: st.Dev, ino: st.Ino}
	c, ok := ident.FromContext(ctx)
	if !ok || c.UID == st.Uid {
		return id, nil
	}
	if flags&unix.O_ACCMODE == unix.O_RDONLY && st.Mode&unix.S_IFMT == unix.S_IFREG &&
		unix.Faccessat2(dirfd, name, unix.X_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW) == nil {
		return id, nil
	}
	return id, unix.EACCES
}

// openOwned opens p with the server's identity, and only if it is still the
// file that usableBy checked: the same inode of the same file system, since
// inode numbers repeat across the file systems mounted beneath the root.
func (f *FS) openOwned(p string, flags uint64, id fileID) (int, error) {
	fd, err := f.openat2(p, flags, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != id.dev || st.Ino != id.ino {
		unix.Close(fd)
		return -1, unix.EACCES
	}
	return fd, nil
}

// withData runs fn as the caller with p open for a data call: opened as the
// caller, or, when that is refused and openData's rule allows it, with the
// server's identity. The common case switches identity once.
func (f *FS) withData(ctx context.Context, p string, flags uint64, fn func(fd int) error) error {
	if err := namespace.CheckPath(p); err != nil {
		return err
	}
	fl := flags | unix.O_NOFOLLOW | unix.O_NONBLOCK
	var owned *fileID
	err := f.as(ctx, func() error {
		fd, err := f.openat2(p, fl, 0)
		if errors.Is(err, unix.EACCES) {
			id, err := f.usableBy(ctx, p, flags)
			owned = &id
			return err
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return fn(fd)
	})
	if err != nil || owned == nil {
		return err
	}
	fd, err := f.openOwned(p, fl, *owned)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return ident.DoContext(ctx, func() error { return fn(fd) })
}

// ReadAt reads len(b) bytes at off, fewer only at the end of the file.
func (f *FS) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	n := 0
	err := f.withData(ctx, p, unix.O_RDONLY, func(fd int) error {
		for n < len(b) {
			m, err := unix.Pread(fd, b[n:], off+int64(n))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || m == 0 {
				return err
			}
			n += m
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("read %q: %w", p, err)
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes b at off. The write runs as the caller, so that the kernel
// clears setuid and setgid bits as it would for the caller's own write.
func (f *FS) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	n := 0
	err := f.withData(ctx, p, unix.O_WRONLY, func(fd int) error {
		for n < len(b) {
			m, err := unix.Pwrite(fd, b[n:], off+int64(n))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return err
			}
			n += m
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("write %q: %w", p, err)
	}
	return n, nil
}

// Fsync makes the data and metadata of p durable on the backing file system.
func (f *FS) Fsync(ctx context.Context, p string) error {
	if err := f.withData(ctx, p, unix.O_RDONLY, unix.Fsync); err != nil {
		return fmt.Errorf("fsync %q: %w", p, err)
	}
	return nil
}

// TruncateOpen truncates p through a descriptor that the caller opened for
// writing (ftruncate(2)): like the data calls, it may proceed where the
// caller's write permission was lost after the open, as long as the caller
// owns the file. The truncation itself runs as the caller, so the kernel
// clears setuid and setgid bits as it would for the caller.
func (f *FS) TruncateOpen(ctx context.Context, p string, size int64) (namespace.Attr, error) {
	var st unix.Stat_t
	err := f.withData(ctx, p, unix.O_WRONLY, func(fd int) error {
		if err := unix.Ftruncate(fd, size); err != nil {
			return err
		}
		return unix.Fstat(fd, &st)
	})
	if err != nil {
		return namespace.Attr{}, fmt.Errorf("ftruncate %q: %w", p, err)
	}
	return attrOf(&st), nil
}

// Allocate runs fallocate(2) on p through a descriptor that the caller
// opened for writing, as TruncateOpen does: mode 0 reserves space and
// extends the file, FALLOC_FL_KEEP_SIZE reserves without extending, and the
// other modes (punching holes, zeroing ranges) are whatever the backing file
// system supports.
func (f *FS) Allocate(ctx context.Context, p string, off, size int64, mode uint32) error {
	err := f.withData(ctx, p, unix.O_WRONLY, func(fd int) error { return unix.Fallocate(fd, mode, off, size) })
	if err != nil {
		return fmt.Errorf("fallocate %q: %w", p, err)
	}
	return nil
}

// ClearSetid clears the setuid and setgid bits of p that the kernel clears
// on write(2) by the caller (ident.Cred.KilledByWrite), for a cache that
// takes the write without writing the backing file. The caller must be able
// to open p for writing; the bits are then cleared with the server's own
// identity, since the writer need not own the file.
func (f *FS) ClearSetid(ctx context.Context, p string) (namespace.Attr, error) {
	fd, err := f.openData(ctx, p, unix.O_WRONLY)
	if err != nil {
		return namespace.Attr{}, fmt.Errorf("clear setid %q: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return namespace.Attr{}, fmt.Errorf("clear setid %q: %w", p, err)
	}
	c, ok := ident.FromContext(ctx)
	if !ok {
		c = ident.Process()
	}
	if kill := c.KilledByWrite(st.Mode, st.Gid); kill != 0 {
		if err := unix.Fchmod(fd, st.Mode&07777&^kill); err != nil {
			return namespace.Attr{}, fmt.Errorf("clear setid %q: %w", p, err)
		}
		st.Mode &^= kill
	}
	return attrOf(&st), nil
}
