package client

import (
	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// opened records that an open or create of path found the backing file
// that a describes, which the reads of path name from now on, until
// the mount releases its last descriptor of path: a server then serves no
// cached extents of a file that this one replaced on the backing store
// (see wire.OpRead). Close-to-open, as NFS gives it: a file opened after
// the replacement reads the new file; one opened before may go on
// reading what the cache holds.
func (f *FS) opened(path string, a namespace.Attr) {
	f.srcMu.Lock()
	defer f.srcMu.Unlock()
	// The change time tells the version of the file the open found.
	f.sources[path] = backing.FileID{Ino: a.Ino, Birth: a.Birth, Gen: a.Gen}.ChangedAt(a.Ctime)
}

// sourceOf returns the identity of the backing file that the last open of
// path found, or the zero one if the client knows none.
func (f *FS) sourceOf(path string) backing.FileID {
	f.srcMu.Lock()
	defer f.srcMu.Unlock()
	return f.sources[path]
}

// forgetSources forgets the backing files that opens of paths found.
func (f *FS) forgetSources(paths ...string) {
	f.srcMu.Lock()
	defer f.srcMu.Unlock()
	for _, p := range paths {
		delete(f.sources, p)
	}
}

// withIdentity reads the creation time and inode generation that end the
// answer of an open or create into a; servers of an earlier release answer
// neither.
func withIdentity(d *wire.Decoder, a namespace.Attr) namespace.Attr {
	if d.More() {
		a.Birth, a.Gen = d.Int64(), d.Uint32()
	}
	return a
}

// naming ends the arguments of a read of path with the identity of the
// backing file its open found (inode number, creation time, generation,
// change time), if the client knows one; servers of an earlier release
// ignore it. Every optional argument before it must be in args already.
func (f *FS) naming(path string, args *wire.Encoder) *wire.Encoder {
	return namingFile(f.sourceOf(path), args)
}

// namingFile ends args with id, as naming does, when id names a file.
func namingFile(id backing.FileID, args *wire.Encoder) *wire.Encoder {
	if id.Ino != 0 {
		args.Uint64(id.Ino).Int64(id.Birth).Uint32(id.Gen).Int64(id.Change)
	}
	return args
}
