package posixns

import (
	"context"
	"encoding/binary"
	"io"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// ReadDir lists the directory p, without "." and "..". Opening it for
// reading makes the permission check of opendir(3).
func (f *FS) ReadDir(ctx context.Context, p string) ([]namespace.DirEntry, error) {
	var out []namespace.DirEntry
	err := f.at(ctx, "readdir", p, func(dirfd int, name string) error {
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve}
		fd, err := unix.Openat2(dirfd, name, &how)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		out, err = readDirents(fd)
		return err
	})
	return out, err
}

// SyncDir makes the entries of directory p durable: it opens it, as the
// caller, and fsyncs it.
func (f *FS) SyncDir(ctx context.Context, p string) error {
	return f.at(ctx, "fsync directory", p, func(dirfd int, name string) error {
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve}
		fd, err := unix.Openat2(dirfd, name, &how)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fsync(fd)
	})
}

// ReadDirPage implements namespace.DirPager with the offsets getdents64
// gives as cookies. Opening the directory for reading makes the
// permission check of opendir(3) at each page.
func (f *FS) ReadDirPage(ctx context.Context, p string, cookie uint64, max int) (es []namespace.DirEntry, next uint64, done bool, err error) {
	err = f.at(ctx, "readdir", p, func(dirfd int, name string) error {
		how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve}
		fd, err := unix.Openat2(dirfd, name, &how)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if _, err := unix.Seek(fd, int64(cookie), io.SeekStart); err != nil {
			return err
		}
		es, next, done, err = readDirentPage(fd, cookie, max)
		return err
	})
	return es, next, done, err
}

// readDirentPage reads the entries of the open directory fd, which is at
// cookie, until they take max bytes.
func readDirentPage(fd int, cookie uint64, max int) ([]namespace.DirEntry, uint64, bool, error) {
	var out []namespace.DirEntry
	buf := make([]byte, 32<<10)
	size := 0
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, 0, false, err
		}
		if n <= 0 {
			return out, cookie, true, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			rec := b[:reclen]
			b = b[reclen:]
			name := cstring(rec[19:])
			if len(out) > 0 && size+len(name)+namespace.DirEntrySize > max {
				return out, cookie, false, nil
			}
			cookie = binary.NativeEndian.Uint64(rec[8:16])
			if name == "." || name == ".." {
				continue
			}
			size += len(name) + namespace.DirEntrySize
			out = append(out, direntOf(fd, name, binary.NativeEndian.Uint64(rec[0:8]), rec[18]))
		}
	}
}

// direntOf is the entry name of directory dirfd with inode ino and d_type
// typ, whose type it asks for when typ does not say.
func direntOf(dirfd int, name string, ino uint64, typ uint8) namespace.DirEntry {
	e := namespace.DirEntry{Name: name, Ino: ino, Mode: dtMode(typ)}
	if e.Mode == 0 {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			e.Mode = st.Mode & unix.S_IFMT
		}
	}
	return e
}

// readDirents reads every entry of the open directory fd with getdents64.
func readDirents(fd int) ([]namespace.DirEntry, error) {
	var out []namespace.DirEntry
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		out = parseDirents(fd, buf[:n], out)
	}
}

// parseDirents appends the linux_dirent64 records in b to out: ino (8
// bytes), offset (8), record length (2), type (1), then the NUL-terminated
// name.
func parseDirents(dirfd int, b []byte, out []namespace.DirEntry) []namespace.DirEntry {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		rec := b[:reclen]
		b = b[reclen:]
		name := cstring(rec[19:])
		if name == "." || name == ".." {
			continue
		}
		out = append(out, direntOf(dirfd, name, binary.NativeEndian.Uint64(rec[0:8]), rec[18]))
	}
	return out
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// dtMode converts a d_type to file type bits, 0 when it is unknown.
func dtMode(t uint8) uint32 {
	switch t {
	case unix.DT_REG:
		return unix.S_IFREG
	case unix.DT_DIR:
		return unix.S_IFDIR
	case unix.DT_LNK:
		return unix.S_IFLNK
	case unix.DT_FIFO:
		return unix.S_IFIFO
	case unix.DT_SOCK:
		return unix.S_IFSOCK
	case unix.DT_CHR:
		return unix.S_IFCHR
	case unix.DT_BLK:
		return unix.S_IFBLK
	}
	return 0
}

// Mkdir creates the directory p with mode, less the umask of the caller
// (see the package comment).
func (f *FS) Mkdir(ctx context.Context, p string, mode uint32) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.creating(ctx, "mkdir", p, func(dirfd int, name string) (err error) {
		if err := unix.Mkdirat(dirfd, name, mode&07777); err != nil {
			return err
		}
		a, err = lstatAt(dirfd, name)
		return err
	})
	return a, err
}

// Mknod creates a FIFO, socket or device file, as Mkdir does.
func (f *FS) Mknod(ctx context.Context, p string, mode uint32, dev uint64) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.creating(ctx, "mknod", p, func(dirfd int, name string) (err error) {
		if err := unix.Mknodat(dirfd, name, mode, int(dev)); err != nil {
			return err
		}
		a, err = lstatAt(dirfd, name)
		return err
	})
	return a, err
}

// Rmdir removes the empty directory p.
func (f *FS) Rmdir(ctx context.Context, p string) error {
	return f.at(ctx, "rmdir", p, func(dirfd int, name string) error {
		return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	})
}

// Unlink removes the name p.
func (f *FS) Unlink(ctx context.Context, p string) error {
	return f.at(ctx, "unlink", p, func(dirfd int, name string) error {
		return unix.Unlinkat(dirfd, name, 0)
	})
}

// Rename renames oldPath to newPath with renameat2(2) and its flags.
func (f *FS) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	return f.at2(ctx, "rename", oldPath, newPath, func(d1 int, n1 string, d2 int, n2 string) error {
		return unix.Renameat2(d1, n1, d2, n2, uint(flags))
	})
}

// Link creates newPath as a hard link to oldPath, without following oldPath
// if it is a symbolic link.
func (f *FS) Link(ctx context.Context, oldPath, newPath string) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.at2(ctx, "link", oldPath, newPath, func(d1 int, n1 string, d2 int, n2 string) (err error) {
		if err := unix.Linkat(d1, n1, d2, n2, 0); err != nil {
			return err
		}
		a, err = lstatAt(d2, n2)
		return err
	})
	return a, err
}

// Symlink creates newPath as a symbolic link to target. The target is stored
// as given; lookups through it stay beneath the root all the same.
func (f *FS) Symlink(ctx context.Context, target, newPath string) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.at(ctx, "symlink", newPath, func(dirfd int, name string) (err error) {
		if err := unix.Symlinkat(target, dirfd, name); err != nil {
			return err
		}
		a, err = lstatAt(dirfd, name)
		return err
	})
	return a, err
}

// Readlink returns the target of the symbolic link p.
func (f *FS) Readlink(ctx context.Context, p string) (string, error) {
	var target string
	err := f.at(ctx, "readlink", p, func(dirfd int, name string) (err error) {
		target, err = readlinkAt(dirfd, name)
		return err
	})
	return target, err
}

// ReadlinkAttr returns the target of the symbolic link p and its
// attributes, both of the link that p named when it was opened
// (namespace.LinkReader). It fails with EINVAL if p is no link.
func (f *FS) ReadlinkAttr(ctx context.Context, p string) (string, namespace.Attr, error) {
	var target string
	var a namespace.Attr
	err := f.at(ctx, "readlink", p, func(dirfd int, name string) error {
		// An O_PATH descriptor of a link holds the link itself, which
		// later renames cannot swap for another file.
		fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if a = attrOf(&st); a.Mode&unix.S_IFMT != unix.S_IFLNK {
			return unix.EINVAL
		}
		target, err = readlinkAt(fd, "")
		return err
	})
	return target, a, err
}

// readlinkAt reads the symbolic link name in dirfd ("": dirfd itself, an
// O_PATH descriptor of a link).
func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}
