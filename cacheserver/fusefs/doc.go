// Package fusefs serves a namespace.FS through FUSE
// (github.com/hanwen/go-fuse/v2), so that programs use the cached files
// through an ordinary mount.
//
// # Identity and permissions
//
// Every request carries the caller's uid and gid in its FUSE header; the
// supplementary groups are read from the "Groups:" line of /proc/PID/status
// of the calling thread (and cached for a second), and its effective
// capabilities are asked of the kernel (capget) at each request, since a
// process may drop them and exec without changing its pid or uid. A thread
// that is gone gets none of either. A thread in a user namespace other than
// the mount's gets no capabilities: they count in its own namespace, where
// any user may be root.
// The kernel gives no pid for a caller outside the mount's pid namespace:
// such a caller has no supplementary groups, and the capabilities its uid
// gives, all of them for root. Mounts therefore run in the host's pid
// namespace (the mount pods and the CSI node plugin use hostPID), and a
// mount for servers that act as the caller warns when it does not.
// They travel to the namespace in the context (ident.NewContext), which
// runs every backing-store operation as that identity, or as the identity
// its administrator configured. The kernel of the backing file system
// therefore makes every permission check: search permission on parent
// directories, write permission on the directory for create, unlink and
// rename, the sticky bit, ownership for chmod, chown and utimes, and the
// clearing of the setuid and setgid bits when a caller without CAP_FSETID
// writes or truncates; root without capabilities is refused what it would
// be refused there. The mount does not use the default_permissions option: with
// it the client's kernel would check against the attributes it has cached
// (and, for an instance acting as a fixed identity, against owners that are
// not the caller), which is both weaker and wrong. The tests under
// test/posix prove the checks through a real mount.
//
// Data calls (read, write, fsync, fallocate) run as the identity that opened
// the file, whose open the namespace checked: with the client cache on, the
// kernel's write-back cache sends writes later with no caller at all.
// CAP_HANDLE_KILLPRIV_V2 is always on, so that the kernel never clears
// setuid and setgid bits with a chmod as the writer (which fails when the
// writer is not the owner); a write that must clear them reaches the file
// system with the writer's identity, and the mount clears the bits after a
// write by a caller without CAP_FSETID when the namespace has not. A chown that
// changes neither owner nor group arrives as a change of nothing, which the
// namespace carries out as such a chown (namespace.SetAttr.KillSetid). The
// kernel's
// write-back cache also keeps file times itself and sends them as explicit
// times, which need ownership: those that come with a truncation are left
// to the backing file system, those within seconds of now are applied as
// "now" (utimensat(UTIME_NOW) needs only write permission), and those sent
// for a writable handle that the namespace refuses are dropped.
//
// # Optional namespace interfaces
//
// A namespace.FS may implement more than the interface: OpenTruncater
// (ftruncate(2) through a descriptor whose file lost its write permission
// after the open, as POSIX allows), Allocater (fallocate(2)), WriteBacker
// (asked to write a file back before an explicit modification time is set
// on it), Flusher (told at every close(2), for close-to-open
// consistency of what the client side holds, and to make what was written
// durable), namespace.XattrProber (asked, at each lookup, about extended
// attributes that reads found absent; see below), and namespace.DirSyncer
// (fsync(2) of a directory, whose entries live on the backing file
// system). The mount uses them when they are there.
//
// # Open files
//
// Open files keep their node, whose path in the tree follows renames. When a
// file that this mount still has open is unlinked, or replaced by a rename,
// it is renamed to a hidden name in the same directory (".burstcache-open-"
// followed by a number, the "silly rename" of NFS), so that it stays
// readable and writable through its descriptors; the hidden name is removed
// at the last release and never listed by readdir, and stat on a descriptor
// reports one link less, as if the name were gone. An open that lands while
// an unlink or a rename removes a file not open waits for it to end, and
// then looks the name up again (see removing); a rename over a file that
// the kernel used just before for another thread hides it too, so that
// opens on their way open it (see busyChild). Calls through the descriptors name the file by its
// hidden name, whatever names go-fuse's tree gives it, and a read that
// overlapped the rename is made again under it (names.go). A directory that
// holds nothing but hidden names of files this mount has open is removed, or
// replaced by a rename, as if empty: the hidden names move up into the
// directory above it first. A namespace that outlives the mount
// (HiddenNoter) is told each hidden name first, so that a name left by a
// mount that died with the file open can be removed later.
//
// A rename that hid the file it replaces and then fails gives the file
// its name back (unhide), and its last release leaves it alone: a failed
// rename changes nothing. When the servers cannot be reached (one crashed
// and restarts), the rename asks them again for a moment, and returns its
// error after that, while the mount goes on asking in the background. A
// rename whose answer got lost with a connection, and that took place
// after all, succeeds. So does the hiding whose answer got lost; when the
// servers stay away past that moment, the rename fails, and the mount
// takes the file for hidden and gives it its name back in the same way
// (finding it there if the hiding did not take place). A file whose name another mount took meanwhile is
// kept beside it, under its name followed by ".burstcache-kept-" and a
// number, and the mount logs where. The note of the hidden name says which
// rename it was for (namespace.Hiding), so that the teardown gives the
// file its name back when the mount ended first, rather than remove it.
//
// # Symbolic links
//
// The mount reads a link with its attributes in one call
// (namespace.LinkReader) at the lookup that finds it, and answers the
// kernel's reads of it, one at every path walk through it, from what it
// read, kept by inode number while the number's attributes stay the link's:
// a link never changes its target. A file that a rename puts in the place
// of a link, or a link in the place of a file, between a lookup and the
// call that follows it makes the call answer ESTALE, which makes the kernel
// walk the path again, rather than EINVAL or ELOOP.
//
// # Failed write-back of cached pages
//
// The kernel sends some writes from its page cache, not from write(2):
// all of them with the client cache, and the pages of shared mappings in
// every mode, which it writes back when the mapping goes, after the last
// close of the file. When such a write fails (a server is unreachable),
// the kernel marks the pages clean, so their bytes are gone, and tells at
// most a later fsync or close, which may never come. The mount counts
// these writes (FUSE_WRITE_CACHE) and Dropped reports them, so that the
// mount process can end saying it did not publish everything.
//
// # Locks
//
// POSIX and BSD locks are left to the kernel (the mount does not ask for
// CAP_POSIX_LOCKS or CAP_FLOCK_LOCKS), which enforces them among the
// processes of the node that holds the mount. Locks do not reach other
// mounts.
//
// # Consistency
//
// With the client cache off, the entry timeout is zero and the kernel drops
// cached pages at every open, so two mounts see each other's writes after
// close (close-to-open consistency, as NFS gives). Every path lookup then
// asks the servers, and the attributes in its answer replace what the kernel
// held; they are trusted for the attribute timeout after that, which spares
// the separate GETATTR that would follow each lookup. Only calls on an open
// file (fstat) see attributes that old, as on NFS.
//
// Invalidate makes the kernel drop what it caches of a path and of what
// the mount knows below it, for changes made behind the mount's back (the
// servers' invalidate, which the mount process hears of through
// client.FS.Watch). With the client cache this is the only way the kernel
// learns them: its write-back cache keeps each file's pages, and its size
// and modification time as it knows them whatever a lookup answers, for
// as long as it holds the inode. The kernel writes a file's dirty pages
// to the namespace before it drops them, then the attributes and names
// go, so that the next lookup makes a new inode with the size the servers
// answer. A file open through the mount keeps its inode, and the size the
// kernel knew, until its last close: reads stop at that size or read zeros
// up to it, and appends land there. Invalidate logs a warning naming each
// such file.
//
// # Extended attributes
//
// Without the client cache the kernel looks a file up before each call on
// its path, getxattr(2) included, and ls -l makes three such calls per
// file: lstat, then getxattr of security.selinux and of
// system.posix_acl_access, which almost always find nothing. The kernel
// keeps no extended attributes of a FUSE file, and caches POSIX ACLs only
// for a mount that asks for FUSE_POSIX_ACL, which this one does not: that
// turns on default_permissions (see above), and the kernel drops the ACLs
// it cached at every lookup anyway. So each getxattr was a round trip of
// its own, five per file in all.
//
// The mount remembers the extended attributes that reads found absent
// (ENODATA) or unsupported (EOPNOTSUPP) in the last ten seconds, four at
// most, and a namespace that implements namespace.XattrProber is asked,
// with the attributes of each lookup, what a getxattr of each of them would
// answer as the caller at that moment: three round trips per file (one with
// the client cache, whose names the kernel trusts for a while). A getxattr
// of an attribute that the calling thread's last lookup found absent is
// answered so, without a round trip, when the thread still has the same
// identity, no extended attribute was changed through the mount (nor an
// invalidation heard of) since that lookup began, and the attribute timeout
// has not passed since; each such answer serves once. Everything else is
// asked of the servers: attributes that exist, refusals, and every read
// that no lookup of the same thread preceded.
//
// A getxattr on the path of a file follows the lookup that the kernel made
// for it, so its answer is as fresh as its own round trip would be. Only a
// getxattr without a lookup of its own, through a descriptor (fgetxattr),
// or on a name that the kernel trusts (a directory's, or any with the
// client cache), may answer that an attribute is absent that another
// mount, or the backing file system, has set since: once, within the
// attribute timeout of the calling thread's lookup of the file, as
// fstat(2) may show attributes that old.
package fusefs
