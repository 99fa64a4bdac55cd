package backing

import (
	"context"
	"io/fs"
	"syscall"
	"time"
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
	// directories when missing, readable by their owner only. The file
	// grows only to off+len(p).
	WriteAt(ctx context.Context, path string, p []byte, off int64) (int, error)
	// Stat returns information about path.
	Stat(ctx context.Context, path string) (fs.FileInfo, error)
	// Truncate sets the size of the file, creating it (and its parents)
	// when missing, as WriteAt does.
	Truncate(ctx context.Context, path string, size int64) error
	// Sync makes the file's data durable (fsync).
	Sync(ctx context.Context, path string) error
	// SyncDir makes the entries of the directory at path durable (fsync of
	// the directory; "." is the root): the names of the files and
	// directories in it, which a Sync of a file does not cover on every
	// file system. A directory that the identity in ctx could not open to
	// fsync on the backing store counts as done.
	SyncDir(ctx context.Context, path string) error
	// Remove removes a file or an empty directory.
	Remove(ctx context.Context, path string) error
	// Rename renames oldPath to newPath like rename(2).
	Rename(ctx context.Context, oldPath, newPath string) error
	// ReadDir lists a directory.
	ReadDir(ctx context.Context, path string) ([]fs.DirEntry, error)
}

// RangeCopier is a Store that can copy a range of a file into a local file
// inside the kernel (splice(2)), so that the bytes do not pass through the
// caller's memory, or through a buffer of its own where the kernel would
// read worse. It is optional: a caller checks for it with
// a type assertion and reads with ReadAt when a Store, or a wrapper around
// one, does not implement it.
type RangeCopier interface {
	// CopyRange copies bytes [off, off+n) of path into the file open for
	// writing as descriptor dst, at dstOff, and returns how many it copied.
	// It copies until n bytes are copied or the end of the file: a count
	// below n with a nil error means the file ends at off+count, and bytes
	// of dst past dstOff+count are left as they were. It retries the short
	// copies the kernel may make on its own. A hole in the file arrives in
	// dst as zeros, or as a hole, which reads as zeros.
	//
	// On an error, count says how many bytes were copied before it; the
	// rest of [dstOff, dstOff+n) of dst may hold anything, so the caller
	// must not trust it. A file that does not exist is an error wrapping
	// fs.ErrNotExist, as for ReadAt. When the two files cannot be copied
	// between in the kernel (different file systems, a file system or
	// kernel without the call), the error wraps errors.ErrUnsupported and
	// the caller should read and write instead.
	//
	// Implementations must not retain or close dst, and must not write to
	// dst outside [dstOff, dstOff+n).
	CopyRange(ctx context.Context, path string, off int64, dst int, dstOff, n int64) (int64, error)

	// CopyRanges opens path once, as CopyRange would, and calls fn with a
	// CopyFunc that copies ranges of it as CopyRange does; it returns the
	// error of opening without calling fn, or else what fn returns. The
	// CopyFunc is valid only until fn returns, and may be called from
	// several goroutines at once.
	//
	// readsAhead reports whether the kernel reads the file ahead of a
	// reader, as it does for files read through the page cache. Then a
	// sequence of copies in file order through one CopyFunc reads as one
	// stream: the read-ahead, which follows an open file, grows with it,
	// where each CopyRange starts anew. A file that a FUSE file system
	// opened for direct I/O, as those in front of remote storage do, is
	// not read ahead: each copy waits for the store in turn, and a caller
	// that wants several ranges soon does better to copy them at once.
	CopyRanges(ctx context.Context, path string, fn func(cp CopyFunc, readsAhead bool) error) error
}

// CopyFunc copies bytes [off, off+n) of a file that RangeCopier.CopyRanges
// opened into dst at dstOff, with the contract of RangeCopier.CopyRange.
type CopyFunc func(off int64, dst int, dstOff, n int64) (int64, error)

// Identifier is a Store that tells files apart better than inode numbers
// do: a file system may give a file the number of one removed just before.
// It is optional; a caller falls back to the inode number of Stat.
type Identifier interface {
	// FileID returns the identity of the file at path.
	FileID(ctx context.Context, path string) (FileID, error)
}

// FileID identifies a file of a backing store. Birth and Gen are 0 where
// the file system, or the caller's access, does not tell them.
type FileID struct {
	Ino uint64
	// Birth is the file's creation time in Unix nanoseconds. File systems
	// keep it to a clock tick: files created within one may share it.
	Birth int64
	// Gen is the inode's generation (FS_IOC_GETVERSION), which a file
	// system that reuses inode numbers, such as ext4, changes when it does.
	Gen uint32
	// Change is the file's change time (ctime) in Unix nanoseconds, 0 where
	// unknown: any write or truncate of the file moves it, and nothing
	// but the file system can set it, so a later one says that the file
	// was changed in place. It tells one version of a file from another,
	// not one file from another (Other ignores it). File systems keep it
	// to a clock tick (ext4: a few milliseconds; Lustre: a second), so a
	// change within the tick of the look is not told.
	Change int64
}

// Other reports whether id and o are surely different files: their inode
// numbers differ, or both know their birth times or generations and those
// do.
func (id FileID) Other(o FileID) bool {
	return id.Ino != o.Ino ||
		id.Birth != 0 && o.Birth != 0 && id.Birth != o.Birth ||
		id.Gen != 0 && o.Gen != 0 && id.Gen != o.Gen
}

// ChangedSince reports whether id is a later version of the file o names:
// the same file, changed in place after o was looked at (both change times
// known, and id's later).
func (id FileID) ChangedSince(o FileID) bool {
	return !id.Other(o) && id.Change != 0 && o.Change != 0 && id.Change > o.Change
}

// ChangedAt returns id with the change time t, or with none for a time
// before 1970, as an answer that tells none carries.
func (id FileID) ChangedAt(t time.Time) FileID {
	id.Change = 0
	if ns := t.UnixNano(); ns > 0 {
		id.Change = ns
	}
	return id
}

// statID is the identity that fi, a FileInfo of a Store, gives: its inode
// number and change time, if it has them.
func statID(fi fs.FileInfo) FileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return FileID{Ino: st.Ino, Change: st.Ctim.Nano()}
	}
	return FileID{}
}

// IDOf returns the identity of the file at path in s.
func IDOf(ctx context.Context, s Store, path string) (FileID, error) {
	if id, ok := s.(Identifier); ok {
		return id.FileID(ctx, path)
	}
	fi, err := s.Stat(ctx, path)
	if err != nil {
		return FileID{}, err
	}
	return statID(fi), nil
}
