package client

import "github.com/burstcache/burstcache/cacheserver/wire"

// opened records that an open or create of path found the backing file
// of inode number ino, which the reads of path name from now on, until
// the mount releases its last descriptor of path: a server then serves no
// cached extents of a file that this one replaced on the backing store
// (see wire.OpRead). Close-to-open, as NFS gives it: a file opened after
// the replacement reads the new file; one opened before may go on
// reading what the cache holds.
func (f *FS) opened(path string, ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sources[path] = ino
}

// sourceOf returns the inode number that the last open of path found, or
// 0 if the client knows none.
func (f *FS) sourceOf(path string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sources[path]
}

// naming ends the arguments of a read of path with the inode number of
// the backing file its open found, if the client knows one; servers of an
// earlier release ignore it. Every optional argument before it must be in
// args already.
func (f *FS) naming(path string, args *wire.Encoder) *wire.Encoder {
	if ino := f.sourceOf(path); ino != 0 {
		args.Uint64(ino)
	}
	return args
}
