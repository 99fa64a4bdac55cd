// Package server is a burstcache cache server: it serves one cache engine
// and the backing file system's namespace over the data-path protocol
// (package wire), and the control API (package control) over HTTP.
//
// Data operations (reads and writes of extents, trims, drops, syncs) go to the
// engine. Metadata operations run on the backing file system through a
// namespace.FS, and the server folds in what only the cache knows: a file's
// size counts the dirty data and the sizes recorded with ExtendSize that the
// backing file does not show yet.
//
// Every operation on the backing store runs as one identity: the one the
// server was configured with, or, for a server started with ActAsCaller, the
// identity carried by the request, which the server trusts because the
// client proved it holds the shared secret. Such a server can be limited to
// the ids an administrator mapped (CallerUIDs, CallerGIDs): other callers
// are refused, and other supplementary groups are not used.
//
// # Cache directory
//
// A server owns its cache directory. The file server.json in it records the
// instance, the server's index, the number of servers and the extent size;
// a server refuses a directory whose record disagrees with its own
// configuration (ErrForeignCacheDir), since the extents there belong to
// another instance or another placement. The engine keeps its data in the
// extents subdirectory, and hidden-names.jsonl records the hidden names of
// files that mounts unlinked while open (see RemoveHidden). Both files hold
// paths byte for byte, as control.Path writes them in JSON: the name of
// a local instance holds its backing directory, and a hidden name the
// directory of its file, either of which may be any bytes. served-calls.log
// records the control calls that change something the server served in the
// last minutes, before it serves each, so that a call seen on the network
// cannot be sent again to the server's next process (see
// control.HandlerConfig.ServedCalls). It is written whole, 256 KiB, when
// the server first starts, and each call is recorded in place in it, in a
// fixed-size record over that of a call too old to be served, so that a
// full cache disk does not stop the calls of a teardown; it grows only when
// more calls came in the last minutes than it holds. It stays when the
// server removes its extents at the end of a teardown: the discard or drain
// that ended it is among the calls it refuses.
package server
