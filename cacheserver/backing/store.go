package backing

import (
	"context"
	"io/fs"
)

// Store is a backing file system addressed by slash-separated paths relative
// to its root ("a/b/c"; never absolute, never ".."). Errors about a path wrap
// the fs errors (fs.ErrNotExist, fs.ErrPermission) so errors.Is works.
// Implementations must be safe for concurrent use and must not retain p.
type Store interface {
	// ReadAt reads like io.ReaderAt: n < len(p) comes with io.EOF at the
	// end of the file.
	ReadAt(ctx context.Context, path string, p []byte, off int64) (int, error)
	// WriteAt writes p at off, creating the file and its parent
	// directories when missing. The file grows only to off+len(p).
	WriteAt(ctx context.Context, path string, p []byte, off int64) (int, error)
	// Stat returns information about path.
	Stat(ctx context.Context, path string) (fs.FileInfo, error)
	// Truncate sets the size of the file, creating it (and its parents)
	// when missing.
	Truncate(ctx context.Context, path string, size int64) error
	// Sync makes the file's data durable (fsync).
	Sync(ctx context.Context, path string) error
	// Remove removes a file or an empty directory.
	Remove(ctx context.Context, path string) error
	// Rename renames oldPath to newPath like rename(2).
	Rename(ctx context.Context, oldPath, newPath string) error
	// ReadDir lists a directory.
	ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error)
}
