package namespace

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Attr is what stat(2) reports for a file.
type Attr struct {
	// Ino is the inode number of the file on the backing file system.
	Ino uint64
	// Mode holds the file type and permission bits, as in syscall.Stat_t.
	Mode uint32
	// Nlink is the number of hard links.
	Nlink uint32
	// UID and GID own the file.
	UID, GID uint32
	// Size is the true size of the file, including data that the cache holds
	// and the backing file system has not seen yet.
	Size int64
	// Blocks is the number of 512-byte blocks allocated.
	Blocks int64
	// Rdev is the device number of a device file.
	Rdev uint64
	// Atime, Mtime and Ctime are the access, modification and change times.
	Atime, Mtime, Ctime time.Time
	// Birth (creation time, Unix nanoseconds) and Gen (inode generation)
	// tell, with Ino, a regular file apart from one that replaced it under
	// a reused inode number. Only an open or create answers them, and 0
	// where the file system does not tell.
	Birth int64
	Gen   uint32
}

// IsDir reports whether a describes a directory.
func (a Attr) IsDir() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// IsRegular reports whether a describes a regular file.
func (a Attr) IsRegular() bool { return a.Mode&syscall.S_IFMT == syscall.S_IFREG }

// Hiding says why a mount gives a file a hidden name: the zero value for
// a file unlinked while open; for a file that a rename is about to
// replace, its name and the file the rename moves, so that a teardown that
// finds the file still hidden can tell whether the rename took place.
type Hiding struct {
	// Name is the path the file has, which the rename of Source takes.
	Name string
	// Source is the path of the file the rename moves, and SourceIno its
	// inode number (0 when the mount does not know it): while that file
	// is at Source, the rename did not take place. A new file may take
	// the number of one removed: whoever keeps the note tells them apart
	// by more (Identifier).
	Source    string
	SourceIno uint64
}

// KeptInfix names a file that a rename hid and then failed to replace,
// and that cannot have its name back since another file took it: the
// file keeps the name with this and a random suffix, in its directory,
// where its owner finds it and nothing removes it (a hidden name is not
// listed, and the teardown of an instance removes the hidden names of
// files unlinked while open).
const KeptInfix = ".burstcache-kept-"

// KeptName returns the name that a file a rename hid and failed to
// replace takes when another file took its name (KeptInfix): the name
// with the infix and suffix r, shortened to stay within 255 bytes.
func KeptName(name string, r uint64) string {
	dir, base := path.Split(name)
	kept := base + KeptInfix + strconv.FormatUint(r, 36)
	if len(kept) > 255 {
		kept = base[:255-len(kept)+len(base)] + kept[len(base):]
	}
	return dir + kept
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	// Mode holds the file type bits (syscall.S_IFMT) of the entry.
	Mode uint32
	Ino  uint64
}

// DirPager is implemented by an FS that can list a directory a page at a
// time, so that a listing too large for one answer goes in several.
type DirPager interface {
	// ReadDirPage lists directory path, without "." and "..", from cookie
	// (0 for the start): entries whose names and DirEntrySize take at most
	// max bytes, or a smaller page that the implementation holds to, and
	// at least one if any is left. It returns the cookie of the next page,
	// and done when none is left. Cookies are the offsets of the backing
	// directory (telldir(3)), as an NFS server's are: an entry that stays
	// in the directory meanwhile is listed once.
	ReadDirPage(ctx context.Context, path string, cookie uint64, max int) (es []DirEntry, next uint64, done bool, err error)
}

// DirEntrySize is what a DirEntry takes in a listing besides its name.
const DirEntrySize = 16

// SetAttr says which attributes to change; nil fields stay as they are.
type SetAttr struct {
	Mode  *uint32
	UID   *uint32
	GID   *uint32
	Size  *int64
	Atime *time.Time
	Mtime *time.Time
	// AtimeNow and MtimeNow set the time to the current time of the backing
	// file system (utimensat UTIME_NOW), which needs only write access.
	AtimeNow, MtimeNow bool
	// KillSetid asks for what chown(2) does when it changes neither the
	// owner nor the group: the kernel clears setuid, and setgid as for a
	// write by the caller, from a file that is not a directory, and
	// refuses a caller who does not own a file it would change. A chown
	// that sets UID or GID does so anyway.
	KillSetid bool
}

// StatFS describes the capacity and use of the namespace: for a cache, the
// capacity and use of the cache, not of the backing file system.
type StatFS struct {
	Bsize   uint32
	Blocks  uint64
	Bfree   uint64
	Bavail  uint64
	Files   uint64
	Ffree   uint64
	NameLen uint32
}

// FS is a file-system namespace. Every method may be called concurrently.
// Implementations must not retain the byte slices passed to them after the
// call returns.
type FS interface {
	// GetAttr returns the attributes of path without following a final
	// symbolic link (lstat).
	GetAttr(ctx context.Context, path string) (Attr, error)
	// SetAttr changes attributes (chmod, chown, truncate, utimens) and returns
	// the new ones.
	SetAttr(ctx context.Context, path string, in SetAttr) (Attr, error)
	// Access checks access(2) permission bits (R_OK, W_OK, X_OK) for the
	// caller.
	Access(ctx context.Context, path string, mask uint32) error
	// ReadDir lists a directory, without "." and "..".
	ReadDir(ctx context.Context, path string) ([]DirEntry, error)
	// Mkdir creates a directory owned by the caller.
	Mkdir(ctx context.Context, path string, mode uint32) (Attr, error)
	// Mknod creates a special file (FIFO, socket, device).
	Mknod(ctx context.Context, path string, mode uint32, dev uint64) (Attr, error)
	// Rmdir removes an empty directory.
	Rmdir(ctx context.Context, path string) error
	// Unlink removes a file name; cached data of the file is forgotten,
	// written back or not, since the file is gone.
	Unlink(ctx context.Context, path string) error
	// Rename renames oldPath to newPath with rename(2) semantics; flags are
	// renameat2 flags (RENAME_NOREPLACE, RENAME_EXCHANGE).
	Rename(ctx context.Context, oldPath, newPath string, flags uint32) error
	// Symlink creates newPath as a symbolic link to target.
	Symlink(ctx context.Context, target, newPath string) (Attr, error)
	// Readlink returns the target of a symbolic link.
	Readlink(ctx context.Context, path string) (string, error)
	// Link creates newPath as a hard link to oldPath.
	Link(ctx context.Context, oldPath, newPath string) (Attr, error)
	// Create creates and opens a regular file owned by the caller; flags are
	// open(2) flags, O_EXCL included.
	Create(ctx context.Context, path string, flags int, mode uint32) (Attr, error)
	// Open checks that the caller may open path with the open(2) flags and
	// applies O_TRUNC. With OpenExec among the flags the caller must be
	// allowed to execute the file rather than read it; the file's data
	// calls may then read it for the kernel that runs it.
	Open(ctx context.Context, path string, flags int) (Attr, error)
	// ReadAt reads up to len(p) bytes at off. It returns fewer bytes only at
	// the end of the file, with io.EOF.
	ReadAt(ctx context.Context, path string, p []byte, off int64) (int, error)
	// WriteAt writes p at off, extending the file as needed.
	WriteAt(ctx context.Context, path string, p []byte, off int64) (int, error)
	// Fsync makes the data of path durable, as the cache's durability mode
	// says: on the cache's SSD, or on the backing file system.
	Fsync(ctx context.Context, path string) error
	// StatFS reports capacity and use.
	StatFS(ctx context.Context) (StatFS, error)
	// Getxattr reads an extended attribute into dest, or returns its size
	// when dest is empty.
	Getxattr(ctx context.Context, path, name string, dest []byte) (int, error)
	// Setxattr sets an extended attribute; flags are XATTR_CREATE or
	// XATTR_REPLACE.
	Setxattr(ctx context.Context, path, name string, value []byte, flags int) error
	// Listxattr lists attribute names, NUL-separated, into dest, or returns
	// the size needed when dest is empty.
	Listxattr(ctx context.Context, path string, dest []byte) (int, error)
	// Removexattr removes an extended attribute.
	Removexattr(ctx context.Context, path, name string) error
}

// DirSyncer is implemented by an FS that can make a directory's entries
// durable, as fsync(2) of a directory does: the names created, renamed and
// removed in it, which live on the backing file system, not in the cache.
type DirSyncer interface {
	SyncDir(ctx context.Context, path string) error
}

// XattrProber is implemented by an FS that can tell, with the attributes
// of a path, what reads of some of its extended attributes would answer at
// the same moment, in one call: a mount that must look a file up before
// each call on its path uses it to answer a getxattr that follows a lookup
// without a second call (see fusefs, "Extended attributes").
type XattrProber interface {
	// GetAttrProbing is GetAttr that also returns, for each of names in
	// order, the error that Getxattr of it as the caller (a size query)
	// would have returned at the same moment: nil when the attribute
	// exists. It may return fewer errors than names, none at all, when it
	// cannot tell.
	GetAttrProbing(ctx context.Context, path string, names []string) (Attr, []error, error)
}

// LinkReader is implemented by an FS that can read a symbolic link with
// the attributes of the link it read, in one look at it: a mount that
// looked a link up and reads it by its path then knows whether the path
// still names that link, or another file since, which a rename may have
// put there meanwhile.
type LinkReader interface {
	// ReadlinkAttr is Readlink that also returns the attributes of the
	// link it read, or a zero Attr (Ino 0) when it cannot tell them.
	ReadlinkAttr(ctx context.Context, path string) (string, Attr, error)
}

// Identifier is implemented by an FS that can tell a file apart from one
// that took its inode number after it was removed, as file systems hand
// out freed numbers again at once.
type Identifier interface {
	// Identity is GetAttr with Birth set, the file's creation time, or 0
	// when the file system does not tell it.
	Identity(ctx context.Context, path string) (Attr, error)
}

// OpenExec is the flag of an open by the kernel of a program it is about to
// execute (FMODE_EXEC, which FUSE passes on among the open flags). Such an
// open needs execute permission, and no read permission, as execve(2) does.
const OpenExec = 0x20

// ErrBadPath is returned for a path that is not clean and relative, such as
// "/a", "a/../b" or "a//b", or that holds a NUL byte. It wraps
// syscall.EINVAL.
var ErrBadPath = fmt.Errorf("path is not clean and relative, or holds a NUL byte: %w", syscall.EINVAL)

// CheckPath returns ErrBadPath unless p is "" (the root) or a clean relative
// path that stays below the root. Names are bytes, and any byte but '/' and
// NUL may be in one: no name holds a NUL, which ends a path in every system
// call, and the index of a server ends the path of a key with one.
func CheckPath(p string) error {
	if p == "" {
		return nil
	}
	if strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") ||
		strings.IndexByte(p, 0) >= 0 {
		return ErrBadPath
	}
	return nil
}

// Errno returns the errno that err carries, or EIO.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

// FileData is the result of a read that left its bytes in a file rather
// than in the caller's buffer: Len bytes at offset Off of the open file
// with descriptor Fd. They stay there until Release is called, which the
// reader must do once it has read them.
type FileData struct {
	Fd      uintptr
	Off     int64
	Len     int
	Release func()
}
