// Package engine is the cache engine of a burstcache server: it keeps
// extents of the files of a backing store (the parallel file system) on a
// local SSD, copies them up on read misses, absorbs writes, writes dirty data
// back, evicts clean data, and survives crashes.
//
// # Model
//
// Files are addressed by clean slash-separated paths relative to the backing
// root. A file is cut into extents of Config.ExtentSize bytes (1 MiB by
// default); extent i covers bytes [i*ExtentSize, (i+1)*ExtentSize). Placement
// across servers is not the engine's business: an engine holds whatever
// extents it is given, and may hold extent 5 of a file but not extent 4.
//
//   - Read: a cached extent is served from the SSD (a hit). A missing one is
//     first copied up whole from the backing file, zero-filled past the
//     backing end of file (no other server can hold data inside an extent),
//     and concurrent readers of it share one copy-up. Reads stop, with
//     io.EOF, at the size the engine knows: the largest of the backing size,
//     the end of data written here, and sizes given to ExtendSize.
//   - Write: an extent wholly overwritten needs no read; a partial write to a
//     missing extent copies it up first (read-modify-write). Each extent
//     tracks one dirty byte range; write-back writes exactly that range, so
//     a backing file grows only by real writes, never by zero padding.
//   - Write-back: when dirty extents pass Tunables.DirtyHigh percent of the
//     capacity, WriteBackThreads workers write back the least recently
//     written extents until DirtyLow. Failures are retried with exponential
//     backoff; the extent stays dirty until a write succeeds, and the error
//     shows in Stats. Flush, FlushPath, FlushAndDrop, EvictPath and, with
//     Durability Backing, Sync write back on demand.
//   - Eviction: past EvictHigh percent of the slots in use, clean extents
//     are evicted least recently used first down to EvictLow. A writer or
//     copy-up that needs a slot when none is free evicts, and when all slots
//     hold dirty data it waits for write-back: it never fails and never
//     drops dirty data.
//   - Rename: cached data is keyed by path, and a striped cache places
//     extents by a hash of the path, so cached data cannot follow a rename.
//     Rename flushes and drops both paths (a file or a whole tree), then
//     renames on the backing store.
//   - Limits: MaxFileSize (ErrFileTooLarge), MaxFiles (ErrTooManyFiles on
//     the first write to a new file past the limit), and the write window:
//     bytes written to the SSD (writes and copy-ups, as written to the slab)
//     within the sliding window past Multiplier x Capacity make the cache
//     read-only (ErrReadOnly), visible in Stats.
//   - Identity: backing-store I/O on behalf of a call runs as the ident.Cred
//     carried by its context; write-back runs as the file's last writer,
//     which the file record keeps.
//
// # On-disk layout
//
// The cache directory holds two files:
//
//	slab      Capacity/ExtentSize slots of ExtentSize bytes, preallocated
//	          with fallocate (package slab)
//	index.db  the bbolt extent index (package index documents its format)
//
// A slot holds one extent; bytes [0, valid) of it are data, bytes past valid
// read as zeros. The index maps (path, extent) to slot, valid length, dirty
// range and last write time, and keeps per-file records: the size the cache
// knows and the identity of the last writer.
//
// # Crash safety
//
// The rules that keep the index truthful across a crash at any point:
//
//  1. New and copied-up extents go into a free slot, and the index entry
//     naming the slot is queued only after the slot's data is written; the
//     committer fdatasyncs the slab before each index commit. A crash before
//     the commit leaves an unreferenced slot: free again on recovery.
//  2. A write to a clean extent never changes its slot: it goes to a new
//     slot (copy-on-write), since after a crash the index would call the
//     changed bytes clean. A write to a dirty extent goes in place; on
//     recovery a dirty extent is written back over its whole valid range, so
//     bytes changed in place before the crash reach the backing store too.
//  3. A slot freed in memory (eviction, drop, copy-on-write) is reused only
//     after the commit that forgets its old entry is durable (pending free
//     list), or a crash could make the old entry name new data.
//  4. One committer batches index changes (group commit). Sync, with
//     Durability Cache, waits for a commit that started after it was called.
//
// On Open the engine rebuilds its state from the index, frees every slot no
// entry names, and resumes write-back of dirty extents.
//
// # Locking
//
// Engine.mu guards the maps, lists and counters and is never held during
// I/O. Each extent has a RWMutex over its slot's content (readers and
// write-back shared, writers exclusive); each file has a RWMutex that
// write-back holds shared while it writes to the backing file and that
// truncate and drop hold exclusively. Lock order: file, extent, engine.
package engine
