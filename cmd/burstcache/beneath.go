package main

import (
	"errors"
	"fmt"
	"io/fs"
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

// flagDir is a directory given by a command-line flag.
type flagDir struct{ flag, path string }

// checkApart refuses directories of which one is, or is beneath, another,
// symbolic links followed: a cache directory beneath the backing directory
// would show its own files through the cache, and let its users write
// them; a backing directory beneath the cache directory would hide them.
func checkApart(dirs ...flagDir) error {
	for i := range dirs {
		if p, err := resolvedPath(absPath(dirs[i].path)); err == nil {
			dirs[i].path = p
		}
	}
	for i, a := range dirs {
		for _, b := range dirs[i+1:] {
			_, aInB := below(b.path, a.path)
			_, bInA := below(a.path, b.path)
			if aInB == nil || bInA == nil {
				return badInput("%s %s and %s %s overlap: give each a directory outside the others", a.flag, a.path, b.flag, b.path)
			}
		}
	}
	return nil
}

// resolvedPath is p with its symbolic links followed, as far as it exists:
// a cache directory is made later.
func resolvedPath(p string) (string, error) {
	rest := ""
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return "", err
		}
		p, rest = filepath.Dir(p), filepath.Join(filepath.Base(p), rest)
	}
}
