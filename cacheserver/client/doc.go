// Package client is the striped client of a burstcache instance: a
// namespace.FS over N cache servers, which the FUSE layer serves.
//
// Reads and writes are cut at extent boundaries and the pieces go to the
// servers that placement assigns them, in parallel. Metadata operations go
// to the path's metadata server.
//
// A server on this machine, reached over a Unix socket, lends the client its
// slab file: reads of 32 KiB and more come back as pinned places in the
// slab that the client reads itself (or splices to the kernel, see
// ReadAtFile). Writes of 32 KiB and more go into a pipe of the server's
// without a copy (vmsplice), and the server moves them into its slab
// (OpWritePiped, in one round trip). The client's slab descriptor is
// read-only: a client stalled across a restart of its server, for however
// long, cannot write into a slot the new server reused, since its pipe went
// with the old server. The pipe refers to the pages of the write's buffer
// until the server moved them: a piped write that fails empties its pipe
// before it returns, since the server may still read it. Each such server has a connection of its own for
// this, since pins belong to the connection that made them.
//
// The pin of a read inside one extent is kept as a lease on the extent
// (up to 1024 per server): later reads of the extent, of any size, are read
// from the slab without asking the server, for as long as the slot's
// generation and the server's epoch, in the server's slot generation file
// that the client maps read-only, are those of the lease and the
// connection is up. A server moves a slot's generation on whenever the
// slot stops holding what the lease says, before the call that changed it
// returns, so a read that starts after a write, truncate, unlink, rename,
// eviction or invalidation finishes never sees what was there before. The
// client drops stale leases and reports its lease reads every 50 ms, and
// gives back leases nobody read for five seconds, since each pins a slot.
// Reads from leases never reach the server, so the client reads ahead for
// them as the server does for the reads it serves: when a reader goes
// through a file's extents on a server in order (package seqread), it
// reads the slots of the next leased
// extents into memory, through a slab descriptor of its own (readAhead).
//
// Files replaced on the backing store behind the cache follow close-to-open
// consistency too: the client remembers the identity of the backing file
// that its last open or create of a path found (inode number, creation time
// and generation, until the mount releases the path), and names it in
// every read and write of the path (OpRead, OpReadSpans, OpWrite,
// OpWritePiped), so that a server holding extents of the file that this
// one replaced drops them and copies the new one up. Leases are kept per identity as well: a lease taken by reads of
// the old file does not serve reads through an open of the new one.
//
// Sizes follow close-to-open consistency, as NFS gives: a client learns a
// file's size when it opens it or asks for its attributes, and remembers how
// far its own writes extended the file. A write that extends a file
// announces the new size to the file's metadata server alongside the data,
// so that another client that opens the file after the writer closed it
// sees the whole file (unless the write ends in an extent that the
// metadata server holds: it then knows the size from the data); the size
// is made durable there (ExtendSize) soon after, at Flush and Fsync, and
// when the client closes. Reads stop at the size the client knows; parts of
// the file a server holds nothing for read as zeros.
//
// A close (Flush) of a file the client wrote since it last made it durable
// makes it durable, as Fsync does: on the servers its writes went to, which
// the client records per file, as their durability says (on the cache
// device, or written back). So a server that crashes loses nothing of a
// file a job closed, whatever its commit interval. Writes to a file still
// open that no commit covered are lost when their server crashes: every
// write and sync answers the server's incarnation, drawn at each start,
// and a close or fsync that finds another incarnation than the one that
// took the writes fails with EIO (ErrServerRestarted) instead of making
// nothing durable. Writes that come after the last close of a file (the
// kernel writes back a shared mapping when it is unmapped) are made durable
// when the client closes, whose error says if they could not be.
//
// Operations that change which file a path names keep cached data safe by
// ordering: unlink dooms the file's data on every server before the name
// goes (the servers keep it, durably, but write none of it back, so a late
// write-back cannot bring the file back), then drops it, or, when the
// removal failed and the file is still there, ends the doom and keeps
// what the job wrote; a removal that takes long holds the doom at
// intervals, so that the servers do not end it by themselves while it
// lasts (Engine.Doom tells the rest), truncate trims every
// server between cutting the backing file and recording the size, and
// rename and link write the data back on every server, then drop it on
// every server, before the name changes, since extents are keyed by path:
// no server forgets a file's size before every server wrote the file
// back.
//
// Invalidation: Watch tells the mount of the paths the servers were asked
// to invalidate (the control API), over a connection to each server that
// holds a request (wire.OpWatch) until there is something to tell. A
// server's invalidation waits until every client that watches it has
// dropped what its kernel caches of the paths, and the client says so
// with its next request; a client that was away too long, or a server that
// restarted meanwhile, drops everything. A server that just started waits
// in each invalidation, for a few seconds, for the clients of its previous
// run to watch again (they retry every second).
//
// Modification times: the backing file shows a write only once it is
// written back, and then with the time of the write-back. The client folds
// the time of its own last write into the attributes it answers (an
// explicit utimens since then wins), and rename and link, whose write-back
// would move the time, put back on the file the time it had before.
// Before an explicit time is set (utimensat(2), as cp -p and tar set it
// after writing), every server writes what it holds dirty of the file,
// whoever wrote it, to the backing file (WriteBack), so that no later
// write-back moves the time. The servers answer once the data is in the
// backing file, before its fsync, which does not move the time
// (Engine.WriteOut says where that holds), and keep their extents dirty until
// their syncer's fsync as every write-back does: after a crash the server
// fsyncs those the backing file holds and writes back the others (rule 6
// of package engine), and this client's next close still makes them
// durable and checks that the servers did not restart meanwhile. Waiting for the fsync
// and evicting, as a rename's write-back does, cost a PFS fsync and an
// index commit per server for every file of a tar extraction: 1,000 files
// of 20 KB through two servers took a median of 6.1 s that way (4.7 to
// 8.9 s), 4.8 s this way (2.7 to 6.2 s) and 4.3 s with no write-back
// before the times (2.6 to 7.1 s), in 11 alternating rounds on the
// development VM at a load of 5 to 9; this way was the faster of the two
// in every round. The syncer still fsyncs each file, off the job's path.
package client
