package fusefs

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// umaskFS is the mount's FUSE file system with the umask of each creation's
// caller kept for its node. The mount asks for CAP_DONT_MASK, so the kernel
// sends the mode of a create, mkdir or mknod as the caller asked for it and
// the caller's umask beside it; whether the umask applies is the backing
// file system's to decide, since a default ACL of the parent directory
// replaces it there.
type umaskFS struct {
	fuse.RawFileSystem
	m *Server
}

// Create creates and opens a file with the caller's umask.
func (u umaskFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer u.m.creating(cancel, in.Umask)()
	return u.RawFileSystem.Create(cancel, in, name, out)
}

// Mkdir creates a directory with the caller's umask.
func (u umaskFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer u.m.creating(cancel, in.Umask)()
	return u.RawFileSystem.Mkdir(cancel, in, name, out)
}

// Mknod creates a special file with the caller's umask.
func (u umaskFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer u.m.creating(cancel, in.Umask)()
	return u.RawFileSystem.Mknod(cancel, in, name, out)
}

// creating notes, until the returned function is called, the umask of the
// creation whose request has the cancel channel cancel, as pageWrite does
// for writes of cached pages.
func (s *Server) creating(cancel <-chan struct{}, umask uint32) (done func()) {
	s.umasks.Store(cancel, umask)
	return func() { s.umasks.Delete(cancel) }
}

// withUmask returns ctx, that of a creation by the request whose context is
// req, with the caller's umask (ident.WithUmask).
func (s *Server) withUmask(req context.Context, ctx context.Context) context.Context {
	if fc, ok := req.(*fuse.Context); ok {
		if u, ok := s.umasks.Load(fc.Cancel); ok {
			return ident.WithUmask(ctx, u.(uint32))
		}
	}
	return ctx
}
