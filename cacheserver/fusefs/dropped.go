package fusefs

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// ErrWritesDropped is returned by Dropped when writes that the kernel sent
// from its page cache failed. The kernel then marks the pages clean, so
// their bytes never reach the cache, and it reports the failure at most
// once, to a later fsync or close of the file, which may never come: the
// pages of a shared mapping are written back when it is unmapped, after
// the last close. The mount is the only one left that knows.
var ErrWritesDropped = errors.New("writes of cached pages failed and the kernel dropped them")

// droppedWrites counts the failed writes of cached pages of a mount.
type droppedWrites struct {
	writes, bytes atomic.Int64
}

// watchedFS is the mount's FUSE file system with a watch on the writes the
// kernel sends from its page cache (FUSE_WRITE_CACHE): those of the
// write-back cache (ClientCache) and of shared mappings in any mode.
// Writes that come from write(2) itself fail to their caller instead.
type watchedFS struct {
	fuse.RawFileSystem
	m *Server
}

// Write writes, and counts a failed write of cached pages.
func (w watchedFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer w.m.pageWrite(cancel, in)()
	n, st := w.RawFileSystem.Write(cancel, in, data)
	w.m.watchWrite(in, len(data), st)
	return n, st
}

// Writev writes, and counts a failed write of cached pages.
func (w watchedFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	defer w.m.pageWrite(cancel, in)()
	n, st := w.RawFileSystem.Writev(cancel, in, data)
	size := 0
	for _, d := range data {
		size += len(d)
	}
	w.m.watchWrite(in, size, st)
	return n, st
}

// pageWrite notes, until the returned function is called, that the request
// whose cancel channel is cancel writes cached pages, so that the node it
// goes to can tell the namespace (fromPageCache). go-fuse hands a node
// only the channel, and each request in flight has its own.
func (s *Server) pageWrite(cancel <-chan struct{}, in *fuse.WriteIn) (done func()) {
	if in.WriteFlags&fuse.WRITE_CACHE == 0 {
		return func() {}
	}
	s.pageWrites.Store(cancel, struct{}{})
	return func() { s.pageWrites.Delete(cancel) }
}

// fromPageCache marks ctx, that of a write by the request whose context is
// req, if the request writes cached pages (namespace.FromPageCache).
func (s *Server) fromPageCache(req context.Context, ctx context.Context) context.Context {
	if fc, ok := req.(*fuse.Context); ok {
		if _, ok := s.pageWrites.Load(fc.Cancel); ok {
			return namespace.FromPageCache(ctx)
		}
	}
	return ctx
}

// watchWrite records a write of size bytes that ended with st, if it was
// one of cached pages and failed.
func (s *Server) watchWrite(in *fuse.WriteIn, size int, st fuse.Status) {
	if st == fuse.OK || in.WriteFlags&fuse.WRITE_CACHE == 0 {
		return
	}
	s.dropped.writes.Add(1)
	s.dropped.bytes.Add(int64(size))
	s.log.Error("Write-back of cached pages failed; the kernel drops them", "node", in.NodeId, "offset", in.Offset, "bytes", size, "status", st)
}

// Dropped returns an error wrapping ErrWritesDropped if writes of cached
// pages failed since the mount began, and nil otherwise.
func (s *Server) Dropped() error {
	n := s.dropped.writes.Load()
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d writes, %d bytes", ErrWritesDropped, n, s.dropped.bytes.Load())
}
