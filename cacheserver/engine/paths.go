package engine

import (
	"errors"
	"io/fs"
	"path"
	"strings"
)

// validPath reports whether p is a clean relative path of a file.
func validPath(p string) bool {
	return p != "" && p != "." && !strings.HasPrefix(p, "/") && path.Clean(p) == p &&
		p != ".." && !strings.HasPrefix(p, "../") && !strings.ContainsRune(p, 0)
}

// under reports whether p is dir or inside it; "" and "." are the root.
func under(p, dir string) bool {
	return dir == "" || dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}

func errorsIsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func joinErr(errs ...error) error { return errors.Join(errs...) }

// filesUnderLocked returns the files at or under dir.
func (e *Engine) filesUnderLocked(dir string) []*file {
	var fs []*file
	if f := e.files[dir]; f != nil {
		return append(fs, f)
	}
	for p, f := range e.files {
		if under(p, dir) {
			fs = append(fs, f)
		}
	}
	return fs
}
