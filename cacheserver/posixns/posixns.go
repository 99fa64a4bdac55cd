package posixns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// resolve keeps every lookup beneath the root and on its file system: ".."
// cannot climb above it, absolute symbolic links and links that climb out
// fail with EXDEV, and so does a path through a mount point (see doc.go);
// /proc magic links are refused.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// FS is a namespace.FS over a local directory. It is safe for concurrent use.
type FS struct {
	root int
	dir  string
	// dev and ino identify the root, for reachRoot.
	dev, ino uint64
	// mnt is the mount ID of the root (statx(2) STATX_MNT_ID), 0 if the
	// kernel does not tell: no name of another mount is served.
	mnt uint64
}

var (
	_ namespace.FS          = (*FS)(nil)
	_ namespace.XattrProber = (*FS)(nil)
	_ namespace.LinkReader  = (*FS)(nil)
)

// ErrRootMoved is returned to an identity other than the server's when the
// path of the backing directory no longer names the directory served. It
// wraps syscall.ESTALE.
var ErrRootMoved = fmt.Errorf("the backing directory's path names another directory: %w", unix.ESTALE)

// New opens the directory dir as the root of a namespace. The directory stays
// open until Close, so the server's own identity is served even if it is
// renamed.
func New(dir string) (*FS, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening backing directory %s: %w", dir, err)
	}
	return newAt(dir, fd)
}

// NewAt serves, as the namespace of the directory dir, the directory that
// root holds open, which its caller opened as it saw fit; the namespace
// keeps its own copy of the descriptor.
func NewAt(dir string, root *os.File) (*FS, error) {
	fd, err := unix.FcntlInt(root.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening backing directory %s: %w", dir, err)
	}
	return newAt(dir, fd)
}

// newAt returns the namespace over fd, which it owns from then on.
func newAt(dir string, fd int) (*FS, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("opening backing directory %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return nil, fmt.Errorf("opening backing directory %s: %w", dir, unix.ENOTDIR)
	}
	return &FS{root: fd, dir: dir, dev: st.Dev, ino: st.Ino, mnt: mountID(fd, "")}, nil
}

// Close releases the root directory. No call may be made after Close.
func (f *FS) Close() error {
	return unix.Close(f.root)
}

// Dir returns the directory that f serves, as it was given to New.
func (f *FS) Dir() string { return f.dir }

// split returns the parent directory of p (relative to the root, "." for the
// root itself) and its final name ("." for the root).
func split(p string) (dir, name string) {
	if p == "" {
		return ".", "."
	}
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ".", p
	}
	return p[:i], p[i+1:]
}

// as runs fn as the identity in ctx. The root was opened with the server's
// own identity; any other identity must also reach it by its path, through
// the directories above it, as a job that used the backing file system
// directly would have to: a shared server acting as each caller would
// otherwise let a caller into a tree whose ancestors keep it out.
func (f *FS) as(ctx context.Context, fn func() error) error {
	c, ok := ident.FromContext(ctx)
	if !ok || c.IsProcess() {
		return fn()
	}
	return ident.Do(c, f.reaching(fn))
}

// asCreator runs fn as as does, for a call that creates a file, with the
// umask that ctx carries (ident.WithUmask), or none: the kernel of the
// backing file system then applies it, or the default ACL of the parent
// directory instead, as for the caller's own creation.
func (f *FS) asCreator(ctx context.Context, fn func() error) error {
	umask, _ := ident.UmaskFromContext(ctx)
	c, ok := ident.FromContext(ctx)
	if !ok || c.IsProcess() {
		return ident.DoUmask(ident.Process(), umask, fn)
	}
	return ident.DoUmask(c, umask, f.reaching(fn))
}

// reaching returns fn preceded by reachRoot.
func (f *FS) reaching(fn func() error) func() error {
	return func() error {
		if err := f.reachRoot(); err != nil {
			return err
		}
		return fn()
	}
}

// reachRoot checks, as the calling thread's identity, that the path of the
// root leads to the directory that f serves. Opening it with O_PATH needs
// search permission on every directory above it, and nothing of the root
// itself, whose own permissions the lookups beneath it check.
func (f *FS) reachRoot() error {
	fd, err := unix.Open(f.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Dev != f.dev || st.Ino != f.ino {
		return ErrRootMoved
	}
	return nil
}

// openat2 opens p beneath the root, retrying when a concurrent rename makes
// the kernel refuse to resolve ".." safely.
func (f *FS) openat2(p string, flags uint64, mode uint32) (int, error) {
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: uint64(mode), Resolve: resolve}
	for {
		fd, err := unix.Openat2(f.root, p, &how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// openDir opens the directory dir beneath the root with O_PATH: only search
// permission on the directories that lead to it is needed, as for any lookup.
func (f *FS) openDir(dir string) (int, error) {
	if dir == "." {
		return f.root, nil
	}
	return f.openat2(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
}

func (f *FS) closeDir(fd int) {
	if fd != f.root {
		unix.Close(fd)
	}
}

// at runs fn as the identity in ctx with the parent directory of p open and
// the final name of p.
func (f *FS) at(ctx context.Context, op, p string, fn func(dirfd int, name string) error) error {
	return f.atAs(ctx, f.as, op, p, fn)
}

// creating is at for a call that creates p, run by asCreator.
func (f *FS) creating(ctx context.Context, op, p string, fn func(dirfd int, name string) error) error {
	return f.atAs(ctx, f.asCreator, op, p, fn)
}

func (f *FS) atAs(ctx context.Context, as func(context.Context, func() error) error, op, p string, fn func(dirfd int, name string) error) error {
	if err := namespace.CheckPath(p); err != nil {
		return fmt.Errorf("%s %q: %w", op, p, err)
	}
	err := as(ctx, func() error {
		dir, name := split(p)
		dirfd, err := f.openDir(dir)
		if err != nil {
			return err
		}
		defer f.closeDir(dirfd)
		return fn(dirfd, name)
	})
	if err != nil {
		return fmt.Errorf("%s %q: %w", op, p, err)
	}
	return nil
}

// at2 is at for the two paths of rename and link.
func (f *FS) at2(ctx context.Context, op, p1, p2 string, fn func(d1 int, n1 string, d2 int, n2 string) error) error {
	if err := errors.Join(namespace.CheckPath(p1), namespace.CheckPath(p2)); err != nil {
		return fmt.Errorf("%s %q %q: %w", op, p1, p2, namespace.ErrBadPath)
	}
	err := f.as(ctx, func() error {
		dir1, name1 := split(p1)
		dir2, name2 := split(p2)
		d1, err := f.openDir(dir1)
		if err != nil {
			return err
		}
		defer f.closeDir(d1)
		d2, err := f.openDir(dir2)
		if err != nil {
			return err
		}
		defer f.closeDir(d2)
		return fn(d1, name1, d2, name2)
	})
	if err != nil {
		return fmt.Errorf("%s %q %q: %w", op, p1, p2, err)
	}
	return nil
}
