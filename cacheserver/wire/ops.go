package wire

import (
	"math"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// The operations of the protocol. Data operations go to the server that
// holds an extent (or to every server); metadata operations go to the
// server that placement assigns to the path.
const (
	// OpRead (path, off i64, len u32[, ino u64, birth i64, gen u32[, change i64]])
	// answers the bytes read in the data section and a bool that is true at
	// the end of the file the server knows. ino, birth and gen identify
	// the backing file that the client's last open of the path found (the
	// inode number of OpOpen's or OpCreate's Attr and the creation time
	// and generation that follow it; 0: unknown), and change its change
	// time (the Ctime of that Attr, Unix nanoseconds; 0: unknown): the
	// server serves no cached extents of a file that this one replaced on
	// the backing store, or of an earlier version of it that the backing
	// store changed in place, but drops them and copies the new file up
	// (engine.ReadingFile). A server of an earlier release ignores them
	// and serves what it holds.
	OpRead Op = 1 + iota
	// OpWrite (path, off i64[, fromPageCache bool[, completing bool[, ino
	// u64, birth i64, gen u32[, change i64]]]]; data) answers the count
	// written (u32) and the server's incarnation (u64; see OpSync). ino,
	// birth, gen and change name the backing file as for OpRead: a write
	// into an extent of a file that the named one replaced lands in the
	// new file's bytes. fromPageCache says that the bytes are pages of the
	// client's page cache, which the job was told were written: the
	// cache's limit on new writes (the write window, and maxFiles at
	// servers of an earlier release) does not refuse them. completing says
	// that they are a piece of a write whose later pieces other servers
	// took: that limit does not refuse them either.
	OpWrite
	// OpTrim (path, size i64) drops cached data past size.
	OpTrim
	// OpDrop (path) forgets cached data of path, dirty or not.
	OpDrop
	// OpFlushAndDrop (path[, keepSizes bool[, keepData bool[, keepCounts
	// bool]]]) writes back
	// then forgets cached data of path, and answers the server's
	// incarnation (u64; see OpSync). With keepSizes the server forgets only
	// clean data, and keeps the sizes it recorded: a client writes a path
	// back this way on every server before it has any forget the sizes. A
	// metadata server may know the size of a file whose end another server
	// holds only from its record; forgotten while that end stays dirty
	// there (its server failed), the file would read short. Servers of an
	// earlier release ignore keepSizes and forget the sizes at once.
	// With keepSizes and keepData the server forgets nothing, and answers
	// once the dirty data is in the backing file, before the write-back's
	// fsync: what a client needs before it sets an explicit modification
	// time there, which a later write would move and a later fsync does
	// not. The data is no more durable than before the call. Servers of an
	// earlier release ignore keepData and evict, which serves too.
	// With keepCounts (and neither of the others) the server forgets the
	// path, but the files it counts under the limit on files keep their
	// places: a client drops a path so before a rename or link, which may
	// fail, and without keepCounts once it succeeded. Servers of an earlier
	// release ignore keepCounts, and a failed rename or link gives the
	// places back.
	OpFlushAndDrop
	// OpSync (path) makes the cached data of path durable per the server's
	// durability setting, and answers the server's incarnation (u64): a
	// number drawn at each start of the server. A write answered by
	// another incarnation than the sync may have been lost in a crash of
	// the server in between, with nothing left for the sync to make
	// durable. Servers older than the incarnation answer none (clients
	// read zero).
	OpSync
	// OpExtendSize (path, size i64, durable bool[, withdrawn bool]) records
	// that the file is at least size bytes long: in memory at once, so that
	// the next GetAttr shows it, and, when durable, in the cache's index
	// before the answer. Withdrawn takes back the size that a write which
	// then failed announced, unless a larger one came since; a server of an
	// earlier release ignores it and records the size again, which changes
	// nothing.
	OpExtendSize
	// OpStatFS () answers a StatFS of the server's cache.
	OpStatFS

	// OpGetAttr (path[, count u32, that many names]) answers an Attr.
	// With names (extended attributes, at most MaxXattrProbes of them) it
	// then answers a count (u32) and, for each of the first count names in
	// order, what a getxattr of it as the caller would have answered at the
	// same time, as an errno (u32, 0 when the attribute exists), so that a
	// client that must look the file up before each getxattr (a mount
	// without the client cache) can answer the getxattr that follows the
	// lookup for an attribute that is not there without a second round
	// trip. A server of an earlier release ignores the names and answers
	// the Attr alone.
	OpGetAttr
	// OpSetAttr (path, SetAttr) answers an Attr.
	OpSetAttr
	// OpTruncate (path, size i64, viaOpen bool) sets the size of the file on
	// the backing store and in the cache, after the client trimmed every
	// server; viaOpen cuts the backing file as OpTruncateOpen does.
	OpTruncate
	// OpAccess (path, mask u32).
	OpAccess
	// OpReadDir (path) answers a count (u32) and that many entries
	// (name, mode u32, ino u64). With a cookie (u64, 0 for the start) and
	// a page size in bytes (u32) after the path, it answers a page of the
	// listing from there, no larger than the server's own page size, then
	// the cookie of the next page (u64) and whether this page is the last
	// (bool); a server of an earlier release ignores both and answers the
	// whole listing, without the two.
	OpReadDir
	// OpMkdir (path, mode u32) answers an Attr.
	OpMkdir
	// OpMknod (path, mode u32, dev u64) answers an Attr.
	OpMknod
	// OpRmdir (path).
	OpRmdir
	// OpUnlink (path).
	OpUnlink
	// OpRename (old, new, flags u32).
	OpRename
	// OpSymlink (target, path) answers an Attr.
	OpSymlink
	// OpReadlink (path[, with attributes bool]) answers the target, and
	// when asked and the server can tell, the Attr of the link it read.
	OpReadlink
	// OpLink (old, new) answers an Attr.
	OpLink
	// OpCreate (path, flags u32, mode u32[, gathered bool]) answers an
	// Attr, whether the file existed (bool; servers older than it answer
	// none), and the backing file's creation time (i64) and inode
	// generation (u32), 0 where unknown, which with the Attr's inode number
	// the client names in its reads (OpRead; servers of an earlier release
	// answer neither). Without O_EXCL an existing file is opened as by OpOpen:
	// with O_TRUNC the client then trims every server and finishes with
	// OpTruncate. A new file past the cache's limit on files fails with
	// EDQUOT.
	OpCreate
	// OpOpen (path, flags u32[, gathered bool]) answers an Attr and the
	// backing file's creation time and generation, as OpCreate. An open
	// for writing fails with EROFS while the cache's write window is used
	// up, and so does OpCreate. gathered says that the client's kernel
	// gathers its writes in its page cache (a mount with the client
	// cache): they will reach the servers as page write-back, which passes
	// the limit on files, so an open for writing of a file the cache does
	// not hold fails with EDQUOT past the limit, as a create does.
	OpOpen
	// OpGetxattr (path, name, size u32) answers the size (u32) and, when
	// size > 0, the value in the data section.
	OpGetxattr
	// OpSetxattr (path, name, flags u32; value in the data section).
	OpSetxattr
	// OpListxattr (path, size u32) answers like OpGetxattr.
	OpListxattr
	// OpRemovexattr (path, name).
	OpRemovexattr
	// OpClearSetid (path) clears the setuid and setgid bits that a write
	// by the caller clears (ident.Cred.KilledByWrite), before it writes.
	OpClearSetid
	// OpInfo () answers the server's index (u32), the number of servers
	// (u32), the extent size (i64), the instance name and whether the
	// instance is load-balanced (bool), so that a client can check it has
	// the servers in the right order, and whether the server takes the
	// capabilities of callers in their identities (bool; servers older
	// than it answer none, and a client then sends none: Client.SendCaps).
	OpInfo
	// OpMayUnlink (path) answers the Attr of path if the caller may remove
	// it (write and search permission on the parent, and the sticky-bit
	// rule), so that the client drops cached data only for an unlink that
	// will succeed.
	OpMayUnlink
	// OpTruncateOpen (path, size i64) cuts the backing file through a
	// descriptor as the caller's open file would (ftruncate(2)), which works
	// even when the file lost its write permission after the open; the
	// client then trims every server and finishes with OpTruncate.
	OpTruncateOpen
	// OpSlabFile () answers, to a client on a Unix socket only, a read-only
	// descriptor of the server's slab file, attached to the reply
	// (SCM_RIGHTS), so that the client can read cached extents itself. A
	// client cannot write the slab with it.
	OpSlabFile
	// OpReadSpans (path, off i64, len u32[, lease bool[, sequential
	// bool[, ino u64, birth i64, gen u32[, change i64]]]]) reads like
	// OpRead, ino, birth, gen and change as there,
	// but answers where the bytes are in the slab file instead of the
	// bytes: a bool that is true at the end of the file the server knows, a
	// bool that is true when the bytes came inline in the data section after
	// all (data the slab does not serve), and otherwise the slab file's
	// device and inode (u64 each), a pin id (u64), a count (u32) and that
	// many spans (slab offset i64, or -1 for zeros; length u32). The pinned
	// slots keep their data until OpUnpin releases the pin, or the
	// connection closes: the client must read them before either. With
	// lease, asked for a read inside one extent, the spans are followed by a
	// bool, true when the pin is a lease on the extent, and then the slot's
	// slab offset (i64), the bytes of the extent it holds (u32), the slot's
	// generation and the server's epoch (u64 each): see OpSlotGens.
	// Sequential tells the server that the client saw this reader go
	// through the file in order, reads it served from leases included, so
	// that the server reads the slots of the next extents ahead.
	OpReadSpans
	// OpUnpin (count u32, that many pin ids u64[, reads u64, bytes u64])
	// releases pins of OpReadSpans replies on the same connection, and
	// counts the reads the client served from leases since its last OpUnpin.
	OpUnpin
	// OpWriteBegin and OpWriteCommit are no longer served (ENOSYS): a
	// client wrote into the slab itself between them, which a client
	// stalled across a restart of the server could do into a slot reused
	// meanwhile. OpWritePiped replaced them.
	OpWriteBegin
	OpWriteCommit
	// OpSlotGens () answers, to a client on a Unix socket only, a read-only
	// descriptor of the server's slot generation file (SCM_RIGHTS): word 0
	// (u64, native order) is the server's epoch, word 1+s the generation of
	// slot s. A client holding a lease from OpReadSpans may read the leased
	// bytes from the slab without asking the server while the slot's
	// generation and the epoch are those of the lease and the connection
	// that holds the pin is up.
	OpSlotGens
	// OpWritePipe () answers, to a client on a Unix socket only, the write
	// end of a pipe of the server's (SCM_RIGHTS) and its id (u64): the
	// client puts the bytes of a write into it (vmsplice, without a copy)
	// and asks OpWritePiped to write them. The pipe holds a whole extent.
	// A client never writes the slab file: a client stalled across a
	// restart of the server finds its pipe closed.
	OpWritePipe
	// OpWritePiped (path, off i64, len u32, pipe id u64[, fromPageCache
	// bool[, completing bool[, ino u64, birth i64, gen u32[, change
	// i64]]]]) writes like OpWrite the len bytes the client put into the
	// pipe, which must hold them and nothing else; the server moves them
	// into the slab itself. It answers the count written (u32) and the
	// server's incarnation (u64). After an error the server closes the
	// pipe.
	OpWritePiped
	// OpDoom (path, unlink u64) begins an unlink of path, which the client
	// names with an id of its own (not 0; a request without one, of an
	// earlier release, begins an unlink that only a timeout ends): the
	// server keeps what it holds of the file, durably, but writes none of
	// it back, and answers whether it kept anything (bool); a file with
	// nothing to keep it forgets, as OpDrop does. The client ends the doom
	// with OpEndDoom. An OpDoom of an unlink that holds the file already
	// changes nothing.
	OpDoom
	// The operation of this number, which ended a doom without saying
	// which or how, is no longer served: a server answers it ENOSYS, and
	// the doom ends after its timeout, as the backing store says.
	_
	// OpHoldDoom (path) says that the unlink that doomed path is still
	// under way: the server restarts the doom's timeout. The client sends
	// it at intervals for as long as the backing store takes to remove the
	// file.
	OpHoldDoom
	// OpNoteHidden (path[, name, source, sourceIno u64]) records, durably,
	// that the caller is about to give a file it has open, and that was
	// unlinked, the hidden name path; or a file named name, which a rename
	// of source (inode number sourceIno) is to replace. The server that
	// removes path (its metadata server) forgets the record when it does;
	// the teardown of the instance removes the names left, those of mounts
	// that died with the file open, but gives a file hidden for a rename
	// its name back while source is still the same file (that number, and
	// the creation time the server reads when the note comes: the rename
	// did not take place). Servers of earlier releases ignore the name and
	// remove such a file too.
	OpNoteHidden
	// OpEndDoom (path, unlink u64, how u32) ends the doom of the unlink,
	// as its removal ended (how: Unlink*), once: sent again, or for a doom
	// that never began or ended meanwhile, it changes nothing.
	OpEndDoom
	// OpWatch (epoch u64, seq u64) asks for the paths the server was told
	// to invalidate (the control API's invalidate) since seq of its epoch,
	// so that a client drops what its kernel caches of them. It answers
	// the server's epoch (u64, drawn at each start), its last seq (u64),
	// whether the client must drop everything (bool: the epoch is not the
	// server's, the server no longer remembers every path since seq, or
	// the paths would make too long an answer)
	// and a count (u32) with that many paths. When nothing came since seq
	// the server holds the request until something does, or the
	// connection ends. A first request (epoch 0) is answered at once,
	// with no paths. The next request, with the seq answered, says that
	// the client is done with those paths: an invalidation waits for that
	// from every client watching it. Servers of an earlier release answer
	// ENOSYS.
	OpWatch
	// OpSyncDir (path) makes the entries of the backing directory durable
	// (fsync of the directory), on the metadata server. Servers of an
	// earlier release answer ENOSYS.
	OpSyncDir
)

// MaxXattrProbes is the most extended attributes that one OpGetAttr asks
// about; a server answers the first MaxXattrProbes of more.
const MaxXattrProbes = 8

// How an unlink ended, for OpEndDoom.
const (
	// UnlinkRemoved means the backing file is gone, and its data with it.
	UnlinkRemoved uint32 = iota
	// UnlinkNotRemoved means the removal failed, or was never asked for.
	UnlinkNotRemoved
	// UnlinkMaybeRemoved means the client cannot tell: the server asks the
	// backing store.
	UnlinkMaybeRemoved
)

// Attr appends a.
func (e *Encoder) Attr(a namespace.Attr) *Encoder {
	e.Uint64(a.Ino).Uint32(a.Mode).Uint32(a.Nlink).Uint32(a.UID).Uint32(a.GID)
	e.Int64(a.Size).Int64(a.Blocks).Uint64(a.Rdev)
	return e.Time(a.Atime).Time(a.Mtime).Time(a.Ctime)
}

// Time appends t as nanoseconds since the epoch. A time outside what that
// holds (before 1678 or after 2262) is sent as the nearest one it holds, as
// a file system clamps a time outside its range; its nanoseconds would
// otherwise wrap around, and a time set in 2500 would reach the backing
// file system as one in 1915.
func (e *Encoder) Time(t time.Time) *Encoder {
	switch {
	case t.Before(minTime):
		t = minTime
	case t.After(maxTime):
		t = maxTime
	}
	return e.Int64(t.UnixNano())
}

// minTime and maxTime are the first and last times that Encoder.Time sends
// as they are.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// Attr reads an Attr.
func (d *Decoder) Attr() namespace.Attr {
	return namespace.Attr{
		Ino: d.Uint64(), Mode: d.Uint32(), Nlink: d.Uint32(), UID: d.Uint32(), GID: d.Uint32(),
		Size: d.Int64(), Blocks: d.Int64(), Rdev: d.Uint64(),
		Atime: d.Time(), Mtime: d.Time(), Ctime: d.Time(),
	}
}

// Time reads a time.
func (d *Decoder) Time() time.Time { return time.Unix(0, d.Int64()) }

const (
	setMode = 1 << iota
	setUID
	setGID
	setSize
	setAtime
	setMtime
	setAtimeNow
	setMtimeNow
	setKillSetid
)

// SetAttr appends s: a bit mask of the fields present, then those fields.
func (e *Encoder) SetAttr(s namespace.SetAttr) *Encoder {
	var mask uint32
	for bit, present := range map[uint32]bool{
		setMode: s.Mode != nil, setUID: s.UID != nil, setGID: s.GID != nil, setSize: s.Size != nil,
		setAtime: s.Atime != nil, setMtime: s.Mtime != nil, setAtimeNow: s.AtimeNow, setMtimeNow: s.MtimeNow,
		setKillSetid: s.KillSetid,
	} {
		if present {
			mask |= bit
		}
	}
	e.Uint32(mask)
	if s.Mode != nil {
		e.Uint32(*s.Mode)
	}
	if s.UID != nil {
		e.Uint32(*s.UID)
	}
	if s.GID != nil {
		e.Uint32(*s.GID)
	}
	if s.Size != nil {
		e.Int64(*s.Size)
	}
	if s.Atime != nil {
		e.Time(*s.Atime)
	}
	if s.Mtime != nil {
		e.Time(*s.Mtime)
	}
	return e
}

// SetAttr reads a SetAttr.
func (d *Decoder) SetAttr() namespace.SetAttr {
	mask := d.Uint32()
	s := namespace.SetAttr{
		AtimeNow: mask&setAtimeNow != 0, MtimeNow: mask&setMtimeNow != 0, KillSetid: mask&setKillSetid != 0,
	}
	if mask&setMode != 0 {
		s.Mode = ptr(d.Uint32())
	}
	if mask&setUID != 0 {
		s.UID = ptr(d.Uint32())
	}
	if mask&setGID != 0 {
		s.GID = ptr(d.Uint32())
	}
	if mask&setSize != 0 {
		s.Size = ptr(d.Int64())
	}
	if mask&setAtime != 0 {
		s.Atime = ptr(d.Time())
	}
	if mask&setMtime != 0 {
		s.Mtime = ptr(d.Time())
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// StatFS appends s.
func (e *Encoder) StatFS(s namespace.StatFS) *Encoder {
	e.Uint32(s.Bsize).Uint64(s.Blocks).Uint64(s.Bfree).Uint64(s.Bavail)
	return e.Uint64(s.Files).Uint64(s.Ffree).Uint32(s.NameLen)
}

// StatFS reads a StatFS.
func (d *Decoder) StatFS() namespace.StatFS {
	return namespace.StatFS{
		Bsize: d.Uint32(), Blocks: d.Uint64(), Bfree: d.Uint64(), Bavail: d.Uint64(),
		Files: d.Uint64(), Ffree: d.Uint64(), NameLen: d.Uint32(),
	}
}

// DirEntries appends a directory listing.
func (e *Encoder) DirEntries(es []namespace.DirEntry) *Encoder {
	e.Uint32(uint32(len(es)))
	for _, de := range es {
		e.String(de.Name).Uint32(de.Mode).Uint64(de.Ino)
	}
	return e
}

// DirEntries reads a directory listing.
func (d *Decoder) DirEntries() []namespace.DirEntry {
	n := d.Uint32()
	var es []namespace.DirEntry
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		es = append(es, namespace.DirEntry{Name: d.String(), Mode: d.Uint32(), Ino: d.Uint64()})
	}
	return es
}
