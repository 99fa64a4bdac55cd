package posixns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// withProcPath runs fn with a /proc/self/fd path that names the file p
// itself, a symbolic link included: an O_PATH descriptor opened with
// O_NOFOLLOW, reached through its magic link by the xattr calls that follow
// links. The kernel allows a process to follow its own descriptors' links
// whatever the thread's file-system identity.
func (f *FS) withProcPath(ctx context.Context, op, p string, fn func(proc string) error) error {
	return f.at(ctx, op, p, func(dirfd int, name string) error {
		return atProcPath(dirfd, name, fn)
	})
}

// atProcPath runs fn with a /proc/self/fd path that names the file name of
// directory dirfd itself (see withProcPath).
func atProcPath(dirfd int, name string, fn func(proc string) error) error {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolve}
	fd, err := unix.Openat2(dirfd, name, &how)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn("/proc/self/fd/" + strconv.Itoa(fd))
}

// GetAttrProbing is GetAttr that also returns what Getxattr of each of
// names would return (namespace.XattrProber), with one switch of identity
// and one walk to the parent directory for all: a file that goes between
// the two gets the error of its absence for every name.
func (f *FS) GetAttrProbing(ctx context.Context, p string, names []string) (namespace.Attr, []error, error) {
	var a namespace.Attr
	errs := make([]error, len(names))
	err := f.at(ctx, "getattr", p, func(dirfd int, name string) (err error) {
		if a, err = f.lookupAt(dirfd, name); err != nil {
			return err
		}
		err = atProcPath(dirfd, name, func(proc string) error {
			for i, xname := range names {
				_, errs[i] = unix.Getxattr(proc, xname, nil)
			}
			return nil
		})
		if err != nil {
			for i := range errs {
				errs[i] = err
			}
		}
		return nil
	})
	if err != nil {
		return a, nil, err
	}
	return a, errs, nil
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
// returns the size needed when dest is empty. The kernel lists the names of
// the trusted namespace only to holders of CAP_SYS_ADMIN, which a switch of
// file-system identity leaves to a server running as root: they are left
// out for callers without it, as their own kernel would.
func (f *FS) Listxattr(ctx context.Context, p string, dest []byte) (int, error) {
	var names []byte
	err := f.withProcPath(ctx, "listxattr", p, func(proc string) (err error) {
		names, err = listAll(proc)
		return err
	})
	if err != nil {
		return 0, err
	}
	if c, ok := ident.FromContext(ctx); ok && !c.Capable(unix.CAP_SYS_ADMIN) {
		names = withoutTrusted(names)
	}
	switch {
	case len(dest) == 0:
		return len(names), nil
	case len(dest) < len(names):
		return 0, fmt.Errorf("listxattr %q: %w", p, unix.ERANGE)
	}
	return copy(dest, names), nil
}

// listAll returns every attribute name of the file at proc, NUL-terminated,
// asking again if the list grows between the size query and the read.
func listAll(proc string) ([]byte, error) {
	for {
		n, err := unix.Listxattr(proc, nil)
		if err != nil || n == 0 {
			return nil, err
		}
		buf := make([]byte, n)
		n, err = unix.Listxattr(proc, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// withoutTrusted drops the names of the trusted namespace from the
// NUL-terminated names.
func withoutTrusted(names []byte) []byte {
	out := names[:0:0]
	for name := range bytes.SplitSeq(names, []byte{0}) {
		if len(name) > 0 && !bytes.HasPrefix(name, []byte("trusted.")) {
			out = append(append(out, name...), 0)
		}
	}
	return out
}

// Removexattr removes the extended attribute name of p.
func (f *FS) Removexattr(ctx context.Context, p, name string) error {
	return f.withProcPath(ctx, "removexattr", p, func(proc string) error {
		return unix.Removexattr(proc, name)
	})
}
