package backing

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// beneath is how every path below the root is resolved: no symbolic link,
// in the path or planted there later, may lead outside the backing
// directory, no mount point may be crossed (the backing store is the
// root's file system alone, as the namespace is), and no /proc magic link
// may be followed.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// resolveFor is how p is resolved for an open with flags. An open for
// writing follows no symbolic link at all. The cache writes a file back
// long after the job wrote it, by its path: had someone who may change a
// directory on the way replaced it with a symbolic link since, the data
// would land wherever the link points, in a file the writer never named
// (and, for a server acting as root, one nobody may change). The paths
// written come from the mount, whose kernel follows every link itself, so
// they hold none unless the tree changed behind the mount; such a write
// fails with ELOOP and the data stays cached, retried and reported.
func resolveFor(flags int) uint64 {
	if flags&unix.O_ACCMODE == unix.O_RDONLY {
		return beneath
	}
	return beneath | unix.RESOLVE_NO_SYMLINKS
}

// openRoot opens the backing root for a call of ctx, on the thread that
// runs as the identity ctx carries. The server's own identity gets the
// directory pinned by OpenDir, if any, whatever its path names now. Any
// other identity opens it by its path, so that its permissions on the
// root's ancestors count, as they would if it used the backing file system
// directly; of a pinned Dir, the path must still name the pinned directory.
func (d *Dir) openRoot(ctx context.Context) (int, error) {
	if d.pin != nil && actsAsProcess(ctx) {
		fd, err := unix.Dup(d.pin.fd)
		if err != nil {
			return -1, &fs.PathError{Op: "dup", Path: d.root, Err: err}
		}
		return fd, nil
	}
	fd, err := unix.Open(d.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: d.root, Err: err}
	}
	if err := d.pin.check(fd); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "open", Path: d.root, Err: err}
	}
	return fd, nil
}

// actsAsProcess reports whether calls of ctx run as the process itself.
func actsAsProcess(ctx context.Context) bool {
	c, ok := ident.FromContext(ctx)
	return !ok || c.IsProcess()
}

// The modes of what a write creates (see the package documentation): a
// file removed behind the cache's back, and its parents, readable by their
// owner only.
const (
	createdFileMode = 0o600
	createdDirMode  = 0o700
)

// open opens p beneath the root with the open(2) flags and mode, for a call
// of ctx on the thread that runs as its identity. With create, missing
// parent directories, and the root itself if no directory is pinned, are
// made first.
func (d *Dir) open(ctx context.Context, p string, flags int, mode uint32, create bool) (*os.File, error) {
	root, err := d.openRoot(ctx)
	if create && d.pin == nil && errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(d.root, createdDirMode); err != nil {
			return nil, err
		}
		root, err = d.openRoot(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	resolve := resolveFor(flags)
	f, err := openat2(root, p, flags, mode, resolve)
	if create && errors.Is(err, fs.ErrNotExist) {
		if err := mkdirBeneath(root, path.Dir(p), resolve); err != nil {
			return nil, err
		}
		f, err = openat2(root, p, flags, mode, resolve)
	}
	return f, err
}

func openat2(dirfd int, p string, flags int, mode uint32, resolve uint64) (*os.File, error) {
	if flags&unix.O_CREAT == 0 {
		mode = 0 // openat2 refuses a mode it would not use
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	fd, err := unix.Openat2(dirfd, p, &how)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// mkdirBeneath makes dir and its missing parents below the root, one
// component at a time, each resolved beneath the root.
func mkdirBeneath(root int, dir string, resolve uint64) error {
	if dir == "." || dir == "" {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		parent, err := openat2(root, path.Dir(sub), unix.O_PATH|unix.O_DIRECTORY, 0, resolve)
		if err != nil {
			return err
		}
		err = unix.Mkdirat(int(parent.Fd()), parts[i], createdDirMode)
		parent.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return &fs.PathError{Op: "mkdir", Path: sub, Err: err}
		}
	}
	return nil
}

// openOwned opens with flags a file that its owner may no longer open so by
// path. POSIX lets a process keep writing through a descriptor
// after its file lost write permission, as when it created the file with
// mode 0444 (git objects, files extracted by tar); a write-back cache writes
// later, through a new descriptor, so for the file's owner only it lifts the
// refusal. st is the file as the owner saw it; the file opened must be the
// same one. A privileged server opens it with its own rights; otherwise the
// owner gives itself read and write permission for the open and restores
// the mode.
func (d *Dir) openOwned(ctx context.Context, p string, flags int, st *unix.Stat_t, privileged bool) (*os.File, error) {
	if !privileged {
		return d.openGranting(ctx, p, flags, st)
	}
	f, err := d.open(context.Background(), p, flags|unix.O_NOFOLLOW, 0, false)
	if err != nil {
		return nil, err
	}
	if err := sameFile(f, st); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (d *Dir) openGranting(ctx context.Context, p string, flags int, st *unix.Stat_t) (*os.File, error) {
	root, err := d.openRoot(ctx)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	h, err := openat2(root, p, unix.O_PATH|unix.O_NOFOLLOW, 0, resolveFor(flags))
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if err := sameFile(h, st); err != nil {
		return nil, err
	}
	proc := fmt.Sprintf("/proc/self/fd/%d", h.Fd())
	if err := unix.Chmod(proc, st.Mode&0o7777|0o600); err != nil {
		return nil, &fs.PathError{Op: "chmod", Path: p, Err: err}
	}
	f, err := os.OpenFile(proc, flags, 0)
	if cerr := unix.Chmod(proc, st.Mode&0o7777); cerr != nil {
		err = errors.Join(err, &fs.PathError{Op: "chmod", Path: p, Err: cerr})
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, err
	}
	return f, nil
}

// sameFile fails unless f is the file st describes.
func sameFile(f *os.File, st *unix.Stat_t) error {
	var got unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &got); err != nil {
		return err
	}
	if got.Dev != st.Dev || got.Ino != st.Ino {
		return &fs.PathError{Op: "open", Path: f.Name(), Err: unix.ESTALE}
	}
	return nil
}
