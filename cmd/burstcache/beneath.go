package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// errNotBeneath is returned for a backing directory that is not, as
// written, the directory it must stay beneath or a path below it.
var errNotBeneath = errors.New("is not beneath")

// openBeneath opens the directory dir with O_PATH, as the process's
// identity. With a base, dir must be base or a path below it, and the part
// of dir below base is resolved with RESOLVE_BENEATH: a symbolic link there
// that leads out of base, absolutely or with "..", fails with EXDEV instead
// of being followed. The part up to base is resolved as written, links
// included: it is the admins', where the part below may be the users'.
func openBeneath(base, dir string) (*os.File, error) {
	if base == "" {
		return os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	rel, err := below(base, dir)
	if err != nil {
		return nil, err
	}
	b, err := os.OpenFile(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.Close() }()
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(int(b.Fd()), rel, &how)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EXDEV):
			return nil, fmt.Errorf("%s leads out of %s through a symbolic link: %w", dir, base, err)
		case err != nil:
			return nil, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		return os.NewFile(uintptr(fd), dir), nil
	}
}

// below returns dir relative to base, "." for base itself, comparing
// cleaned paths element by element: /lus/ab is not below /lus/a.
func below(base, dir string) (string, error) {
	base, dir = filepath.Clean(base), filepath.Clean(dir)
	rel, err := filepath.Rel(base, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(base) != filepath.IsAbs(dir) {
		return "", fmt.Errorf("%s %w %s", dir, errNotBeneath, base)
	}
	return rel, nil
}
