package posixns

import (
	"context"
	"strconv"

	"golang.org/x/sys/unix"
)

// withProcPath runs fn with a /proc/self/fd path that names the file p
// itself, a symbolic link included: an O_PATH descriptor opened with
// O_NOFOLLOW, reached through its magic link by the xattr calls that follow
// links. The kernel allows a process to follow its own descriptors' links
// whatever the thread's file-system identity.
func (f *FS) withProcPath(ctx context.Context, op, p string, fn func(proc string) error) error {
	return f.at(ctx, op, p, func(dirfd int, name string) error {
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve}
		fd, err := unix.Openat2(dirfd, name, &how)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return fn("/proc/self/fd/" + strconv.Itoa(fd))
	})
}

// Getxattr reads the extended attribute name of p into dest, or returns its
// size when dest is empty.
func (f *FS) Getxattr(ctx context.Context, p, name string, dest []byte) (int, error) {
	var n int
	err := f.withProcPath(ctx, "getxattr", p, func(proc string) (err error) {
		n, err = unix.Getxattr(proc, name, dest)
		return err
	})
	return n, err
}

// Setxattr sets the extended attribute name of p.
func (f *FS) Setxattr(ctx context.Context, p, name string, value []byte, flags int) error {
	return f.withProcPath(ctx, "setxattr", p, func(proc string) error {
		return unix.Setxattr(proc, name, value, flags)
	})
}

// Listxattr lists the names of the extended attributes of p into dest, or
// returns the size needed when dest is empty.
func (f *FS) Listxattr(ctx context.Context, p string, dest []byte) (int, error) {
	var n int
	err := f.withProcPath(ctx, "listxattr", p, func(proc string) (err error) {
		n, err = unix.Listxattr(proc, dest)
		return err
	})
	return n, err
}

// Removexattr removes the extended attribute name of p.
func (f *FS) Removexattr(ctx context.Context, p, name string) error {
	return f.withProcPath(ctx, "removexattr", p, func(proc string) error {
		return unix.Removexattr(proc, name)
	})
}
