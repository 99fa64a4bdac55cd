// Package index is the durable extent index of a cache directory.
//
// The index says which slot of the slab holds each cached extent, how much of
// the slot is valid, which bytes are dirty, and, per file, the size the cache
// knows and the identity of its last writer. It lives in a bbolt database
// (file "index.db" in the cache directory): bbolt commits are atomic and
// fsynced, so after a crash the index is exactly as of its last commit.
// bbolt locks the file while it is open (flock), so a second process over
// the same cache directory, which would hand out the same slots, waits for
// the first to let go and then fails with ErrInUse; the kernel lets go of
// the lock of a process that dies.
//
// # On-disk format
//
// All integers are big-endian. Six buckets:
//
//	meta     "version"     uint32 format version (1)
//	         "extentSize"  uint64 bytes per extent and per slot
//	         "slots"       uint64 number of slots in the slab
//	         "incarnation" uint64 incarnation, uint8 1 if the run that
//	                       stored it ended cleanly, 0 while it runs
//	extents  key:   path bytes, 0x00, uint64 extent number
//	         value: uint32 slot, uint32 valid length, uint32 dirty start,
//	                uint32 dirty end (start == end: clean), int64 last
//	                write (Unix nanoseconds)                     = 24 bytes
//	files    key:   path bytes
//	         value: int64 known size, uint8 flags (1: an identity
//	                follows, 2: doomed, an unlink is under way, 4: the
//	                count of unlinks under way follows, 8: the identity
//	                of the backing file when the doom began follows, 16:
//	                the ids of the unlinks under way follow, 32: the
//	                identity's capabilities follow, written only when
//	                they differ from what its uid gives), then with 4
//	                uint32 count, with 8 uint64 inode, int64 creation time
//	                (Unix nanoseconds), uint32 inode generation (0:
//	                unknown), with 16 uint32 n (1 up to the count) and n
//	                uint64 ids, with 1 uint32 uid, uint32 gid, uint32
//	                group count, uint32 groups..., with 32 uint64
//	                capabilities (bit n: capability n)
//	changes  key:   uint8 kind ('n': the entries of a backing directory,
//	                'a': the inode of a backing file), path bytes
//	         value: as a files value of size 0 with no doom: the
//	                identity to fsync as, if any
//	sources  key:   path bytes
//	         value: uint64 inode, int64 creation time (Unix
//	                nanoseconds), uint32 inode generation (0: unknown)
//	                of the backing file the path's cached extents were
//	                copied from                                  = 20 bytes
//	versions key:   path bytes
//	         value: int64 change time (Unix nanoseconds) of the backing
//	                file when the path's extents were copied from it, for
//	                a path with a source record; none: unknown   = 8 bytes
//
// A change record names what calls through the cache changed on the
// backing store itself, a name or an inode, and no fsync there made
// durable yet; the engine deletes it once one did. A source record names
// the backing file a file's extents are of, so that a file the backing
// store replaced while the engine was stopped is not served from extents
// of the one it replaced, and its version one that the backing store
// changed in place. An index of a release that knew no changes, sources
// or versions gets the buckets when opened; such a release opening this
// index ignores them (a source record it left stale makes the next
// release copy the file up again, at worst, and so does a version: one
// older than the file's makes the extents be dropped).
//
// Paths never contain 0x00, so an extent key sorts after its path and before
// the path of any other file with that prefix.
//
// Every commit runs as one durable step of the cache directory's vfs.FS, so a
// crashing test file system can stop the engine exactly at a commit.
package index
