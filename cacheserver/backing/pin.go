package backing

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrRootMoved is returned to an identity other than the server's when the
// path of a pinned backing directory names another directory than the one
// served, as after a rename of the directory and a symbolic link put in its
// place. It wraps unix.ESTALE.
var ErrRootMoved = fmt.Errorf("the backing directory's path names another directory: %w", unix.ESTALE)

// pinnedDir is the directory a Dir serves, held open.
type pinnedDir struct {
	fd       int
	dev, ino uint64
}

// OpenDir returns a Store over the directory root, which dir holds open:
// the Store keeps serving that directory, as the namespace over the same
// directory does, even if its path later names another one. Without the
// pin, a user who may write the directory's parent could rename it and
// put a symbolic link in its place, and write-back would follow the link
// to a directory the cache was never given. dir is the directory of root,
// opened by the caller (as the server's identity, and beneath whatever the
// caller decided root must stay beneath); OpenDir keeps its own copy of
// the descriptor.
func OpenDir(root string, dir *os.File) (*Dir, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return nil, fmt.Errorf("pinning backing directory %s: %w", root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("pinning backing directory %s: %w", root, unix.ENOTDIR)
	}
	fd, err := unix.FcntlInt(dir.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pinning backing directory %s: %w", root, err)
	}
	d := NewDir(root)
	d.pin = &pinnedDir{fd: fd, dev: st.Dev, ino: st.Ino}
	return d, nil
}

// Close releases the pinned directory, if any. No call may be made after
// Close.
func (d *Dir) Close() error {
	if d.pin == nil {
		return nil
	}
	return unix.Close(d.pin.fd)
}

// check fails with ErrRootMoved unless fd is the pinned directory; without
// a pin, any directory will do.
func (p *pinnedDir) check(fd int) error {
	if p == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Dev != p.dev || st.Ino != p.ino {
		return ErrRootMoved
	}
	return nil
}
