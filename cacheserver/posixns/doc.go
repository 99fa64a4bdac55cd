// Package posixns serves a namespace.FS from a local directory: the backing
// file system (the PFS) as a cache server sees it.
//
// Every operation runs under ident.DoContext, so the kernel of the backing
// file system makes every permission check, parent directories included, as
// the identity carried by the context: the caller's, or the one an
// administrator configured for the instance. The root itself is held open
// by the server, so an identity other than the server's must first reach it
// by its path: the directories above the backing directory count too.
//
// Paths never leave the root. Parent directories and files are opened with
// openat2(2) and RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS, so that a symbolic
// link inside the tree that points outside it (absolutely, or with "..")
// fails with EXDEV instead of being followed; the final name is then handled
// with the *at system calls (fstatat, mkdirat, unlinkat, renameat2, ...)
// without following a final symbolic link.
//
// Paths never leave the root's file system either: a path through a mount
// point beneath the root, and a lookup of the mount point itself, fail with
// EXDEV (RESOLVE_NO_XDEV, and the mount ID of the name for a lookup). Another
// file system numbers its inodes anew, and the mount knows files by inode
// number: a file of it would be taken for the file of the root's file system
// with the same number, and reads and writes of one would reach the other;
// a bind mount of a directory above itself would make a loop of the tree.
// Such names are still listed. Extended attributes are reached
// through an O_PATH descriptor of the final name and its /proc/self/fd entry,
// which names the file itself even when it is a symbolic link.
//
// Data calls (ReadAt, WriteAt, Fsync, and TruncateOpen and Allocate, which
// act through an open file) open the file per call and switch identity once
// for the open and the I/O. They are only made for a file that the caller
// has opened, and an open file stays usable after its mode changes (a file
// created with mode 0444 and O_RDWR can be written), so when the caller's
// identity may no longer open the file but may look it up and owns it (and
// could change its mode back anyway), or reads a program it may execute
// (the kernel reads what it runs through the open of execve(2), which
// needs execute permission only: namespace.OpenExec), the descriptor is
// opened with the server's own identity; the I/O itself still runs as the caller, so that
// the kernel clears the setuid and setgid bits on write exactly as it would
// for the caller. ClearSetid clears those bits for a cache that takes a
// write without writing the backing file.
//
// New files, directories and special files are created with the mode the
// caller asked for and the caller's umask (ident.WithUmask; none when the
// context carries none), set as the umask of the thread that creates them
// (ident.DoUmask): the kernel of the backing file system applies it, or,
// under a directory with a default ACL, ignores it and derives the mode and
// access ACL from the default ACL, exactly as for the caller's own creation.
// The server process's own umask plays no part, and no mode is changed
// after the creation, which would overwrite an ACL's mask entry.
package posixns
