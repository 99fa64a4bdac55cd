package posixns

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// attrOf converts a stat(2) result.
func attrOf(st *unix.Stat_t) namespace.Attr {
	return namespace.Attr{
		Ino:   st.Ino,
		Mode:  st.Mode,
		Nlink: uint32(st.Nlink),
		UID:   st.Uid,
		GID:   st.Gid,
		Size:  st.Size,
		// Blocks is in 512-byte units on Linux, as namespace.Attr wants.
		Blocks: st.Blocks,
		Rdev:   st.Rdev,
		Atime:  time.Unix(st.Atim.Unix()),
		Mtime:  time.Unix(st.Mtim.Unix()),
		Ctime:  time.Unix(st.Ctim.Unix()),
	}
}

// lstatAt returns the attributes of name in dirfd without following it.
func lstatAt(dirfd int, name string) (namespace.Attr, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return namespace.Attr{}, err
	}
	return attrOf(&st), nil
}

// lookupAt is lstatAt for a name that may be a mount point: EXDEV for one,
// since what it shows is another file system's, or a directory of this one
// seen again (a bind mount), maybe above itself. Only a directory or a name
// of another device is asked for its mount: a file of this file system
// bound over another is a hard link of sorts, and opens of it fail all the
// same (RESOLVE_NO_XDEV). A name just made here needs no such look.
func (f *FS) lookupAt(dirfd int, name string) (namespace.Attr, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return namespace.Attr{}, err
	}
	maybeMounted := st.Mode&unix.S_IFMT == unix.S_IFDIR || st.Dev != f.dev
	if maybeMounted && f.mnt != 0 && mountID(dirfd, name) != f.mnt {
		return namespace.Attr{}, unix.EXDEV
	}
	return attrOf(&st), nil
}

// mountID returns the mount ID of name in dirfd ("" for dirfd itself),
// not following a final symbolic link, or 0 if the kernel does not tell.
func mountID(dirfd int, name string) uint64 {
	var stx unix.Statx_t
	if unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx) != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0
	}
	return stx.Mnt_id
}

var _ namespace.Identifier = (*FS)(nil)

// Identity returns the attributes of p, without following a final
// symbolic link, with its creation time (namespace.Identifier).
func (f *FS) Identity(ctx context.Context, p string) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.at(ctx, "getattr", p, func(dirfd int, name string) (err error) {
		if a, err = f.lookupAt(dirfd, name); err != nil {
			return err
		}
		var stx unix.Statx_t
		if unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME|unix.STATX_INO, &stx) == nil &&
			stx.Mask&unix.STATX_BTIME != 0 && stx.Ino == a.Ino {
			a.Birth = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
		}
		return nil
	})
	return a, err
}

// GetAttr returns the attributes of p without following a final symbolic
// link.
func (f *FS) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.at(ctx, "getattr", p, func(dirfd int, name string) (err error) {
		a, err = f.lookupAt(dirfd, name)
		return err
	})
	return a, err
}

// SetAttr changes the attributes of p in the order that keeps each change:
// ownership first (chown clears setuid bits), then the mode, the size, and
// the times last (truncation sets the modification time).
func (f *FS) SetAttr(ctx context.Context, p string, in namespace.SetAttr) (namespace.Attr, error) {
	var a namespace.Attr
	err := f.at(ctx, "setattr", p, func(dirfd int, name string) (err error) {
		if err := setAttrAt(dirfd, name, in); err != nil {
			return err
		}
		a, err = f.lookupAt(dirfd, name)
		return err
	})
	return a, err
}

func setAttrAt(dirfd int, name string, in namespace.SetAttr) error {
	// A chown to the same owner, or to none, is what KillSetid asks for:
	// the kernel clears the bits and checks the caller may.
	if in.UID != nil || in.GID != nil || in.KillSetid {
		if err := unix.Fchownat(dirfd, name, idOrKeep(in.UID), idOrKeep(in.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if in.Mode != nil {
		// fchmodat2 with AT_SYMLINK_NOFOLLOW refuses a symbolic link
		// (EOPNOTSUPP) instead of changing what it points to.
		if err := unix.Fchmodat(dirfd, name, *in.Mode&07777, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if in.Size != nil {
		if err := truncateAt(dirfd, name, *in.Size); err != nil {
			return err
		}
	}
	return setTimesAt(dirfd, name, in)
}

func idOrKeep(id *uint32) int {
	if id == nil {
		return -1
	}
	return int(*id)
}

// truncateAt truncates name: opening it for writing makes the same
// permission check as truncate(2).
func truncateAt(dirfd int, name string, size int64) error {
	how := unix.OpenHow{Flags: unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: resolve}
	fd, err := unix.Openat2(dirfd, name, &how)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Ftruncate(fd, size)
}

func setTimesAt(dirfd int, name string, in namespace.SetAttr) error {
	if in.Atime == nil && in.Mtime == nil && !in.AtimeNow && !in.MtimeNow {
		return nil
	}
	ts := []unix.Timespec{timespec(in.Atime, in.AtimeNow), timespec(in.Mtime, in.MtimeNow)}
	return unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func timespec(t *time.Time, now bool) unix.Timespec {
	switch {
	case now:
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	case t == nil:
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
	// Not t.UnixNano, which wraps around for times past 2262.
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

// Access checks the caller's permission with faccessat2(AT_EACCESS), which
// uses the thread's file-system identity rather than the real uid.
func (f *FS) Access(ctx context.Context, p string, mask uint32) error {
	return f.at(ctx, "access", p, func(dirfd int, name string) error {
		return unix.Faccessat2(dirfd, name, mask, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW)
	})
}

// StatFS reports the capacity and use of the file system holding the root.
func (f *FS) StatFS(ctx context.Context) (namespace.StatFS, error) {
	var st unix.Statfs_t
	err := f.as(ctx, func() error { return unix.Fstatfs(f.root, &st) })
	if err != nil {
		return namespace.StatFS{}, fmt.Errorf("statfs: %w", err)
	}
	return namespace.StatFS{
		Bsize: uint32(st.Bsize), Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail,
		Files: st.Files, Ffree: st.Ffree, NameLen: uint32(st.Namelen),
	}, nil
}
