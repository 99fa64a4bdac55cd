package backing

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// Dir is a Store over a local or mounted POSIX directory.
type Dir struct {
	root string
}

var _ Store = (*Dir)(nil)

// NewDir returns a Store over the directory root.
func NewDir(root string) *Dir { return &Dir{root: root} }

func (d *Dir) abs(p string) string { return filepath.Join(d.root, filepath.FromSlash(p)) }

// ReadAt implements Store.
func (d *Dir) ReadAt(ctx context.Context, p string, b []byte, off int64) (n int, err error) {
	err = ident.DoContext(ctx, func() error {
		f, err := os.Open(d.abs(p))
		if err != nil {
			return err
		}
		defer f.Close()
		n, err = f.ReadAt(b, off)
		if n == len(b) && n >= readAheadMin {
			// Each call opens the file anew, which loses the kernel's
			// sequential read-ahead state: ask for the next range now, so
			// that a sequential reader finds it in memory.
			unix.Fadvise(int(f.Fd()), off+int64(n), int64(n), unix.FADV_WILLNEED)
		}
		return err
	})
	return n, err
}

// readAheadMin is the smallest read that triggers read-ahead of the next
// range of the same size.
const readAheadMin = 256 << 10

// WriteAt implements Store.
func (d *Dir) WriteAt(ctx context.Context, p string, b []byte, off int64) (n int, err error) {
	err = ident.DoContext(ctx, func() error {
		f, err := d.openWrite(p)
		if err != nil {
			return err
		}
		n, err = f.WriteAt(b, off)
		return errors.Join(err, f.Close())
	})
	return n, err
}

// openWrite opens p for writing, creating it and its parents as needed.
func (d *Dir) openWrite(p string) (*os.File, error) {
	f, err := os.OpenFile(d.abs(p), os.O_WRONLY|os.O_CREATE, 0o666)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(d.abs(path.Dir(p)), 0o777); err != nil {
			return nil, err
		}
		f, err = os.OpenFile(d.abs(p), os.O_WRONLY|os.O_CREATE, 0o666)
	}
	return f, err
}

// Stat implements Store.
func (d *Dir) Stat(ctx context.Context, p string) (fi fs.FileInfo, err error) {
	err = ident.DoContext(ctx, func() error {
		fi, err = os.Stat(d.abs(p))
		return err
	})
	return fi, err
}

// Truncate implements Store.
func (d *Dir) Truncate(ctx context.Context, p string, size int64) error {
	return ident.DoContext(ctx, func() error {
		f, err := d.openWrite(p)
		if err != nil {
			return err
		}
		return errors.Join(f.Truncate(size), f.Close())
	})
}

// Sync implements Store.
func (d *Dir) Sync(ctx context.Context, p string) error {
	return ident.DoContext(ctx, func() error {
		f, err := os.OpenFile(d.abs(p), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return errors.Join(f.Sync(), f.Close())
	})
}

// Remove implements Store.
func (d *Dir) Remove(ctx context.Context, p string) error {
	return ident.DoContext(ctx, func() error { return os.Remove(d.abs(p)) })
}

// Rename implements Store.
func (d *Dir) Rename(ctx context.Context, oldPath, newPath string) error {
	return ident.DoContext(ctx, func() error { return os.Rename(d.abs(oldPath), d.abs(newPath)) })
}

// ReadDir implements Store.
func (d *Dir) ReadDir(ctx context.Context, p string) (es []fs.DirEntry, err error) {
	err = ident.DoContext(ctx, func() error {
		es, err = os.ReadDir(d.abs(p))
		return err
	})
	return es, err
}

// ReadFull reads len(p) bytes at off or up to the end of the file, whichever
// comes first, and returns how many it read. Reaching the end of the file, or
// a file that does not exist, is not an error.
func ReadFull(ctx context.Context, s Store, p string, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := s.ReadAt(ctx, p, b[n:], off+int64(n))
		n += m
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, fs.ErrNotExist):
			return n, nil
		case err != nil:
			return n, err
		case m == 0:
			return n, nil
		}
	}
	return n, nil
}
