package posix

import (
	"context"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// fixedIdentity is a namespace that acts as one identity whoever calls, as a
// cache server does for an instance with a configured runAs.
type fixedIdentity struct {
	namespace.FS
	as ident.Cred
}

func (f fixedIdentity) ctx(ctx context.Context) context.Context { return ident.NewContext(ctx, f.as) }

func (f fixedIdentity) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	return f.FS.GetAttr(f.ctx(ctx), p)
}

func (f fixedIdentity) SetAttr(ctx context.Context, p string, in namespace.SetAttr) (namespace.Attr, error) {
	return f.FS.SetAttr(f.ctx(ctx), p, in)
}

func (f fixedIdentity) Access(ctx context.Context, p string, mask uint32) error {
	return f.FS.Access(f.ctx(ctx), p, mask)
}

func (f fixedIdentity) ReadDir(ctx context.Context, p string) ([]namespace.DirEntry, error) {
	return f.FS.ReadDir(f.ctx(ctx), p)
}

func (f fixedIdentity) Mkdir(ctx context.Context, p string, mode uint32) (namespace.Attr, error) {
	return f.FS.Mkdir(f.ctx(ctx), p, mode)
}

func (f fixedIdentity) Mknod(ctx context.Context, p string, mode uint32, dev uint64) (namespace.Attr, error) {
	return f.FS.Mknod(f.ctx(ctx), p, mode, dev)
}

func (f fixedIdentity) Rmdir(ctx context.Context, p string) error { return f.FS.Rmdir(f.ctx(ctx), p) }

func (f fixedIdentity) Unlink(ctx context.Context, p string) error { return f.FS.Unlink(f.ctx(ctx), p) }

func (f fixedIdentity) Rename(ctx context.Context, o, n string, flags uint32) error {
	return f.FS.Rename(f.ctx(ctx), o, n, flags)
}

func (f fixedIdentity) Symlink(ctx context.Context, target, p string) (namespace.Attr, error) {
	return f.FS.Symlink(f.ctx(ctx), target, p)
}

func (f fixedIdentity) Readlink(ctx context.Context, p string) (string, error) {
	return f.FS.Readlink(f.ctx(ctx), p)
}

func (f fixedIdentity) Link(ctx context.Context, o, n string) (namespace.Attr, error) {
	return f.FS.Link(f.ctx(ctx), o, n)
}

func (f fixedIdentity) Create(ctx context.Context, p string, flags int, mode uint32) (namespace.Attr, error) {
	return f.FS.Create(f.ctx(ctx), p, flags, mode)
}

func (f fixedIdentity) Open(ctx context.Context, p string, flags int) (namespace.Attr, error) {
	return f.FS.Open(f.ctx(ctx), p, flags)
}

func (f fixedIdentity) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	return f.FS.ReadAt(f.ctx(ctx), p, b, off)
}

func (f fixedIdentity) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	return f.FS.WriteAt(f.ctx(ctx), p, b, off)
}

func (f fixedIdentity) Fsync(ctx context.Context, p string) error { return f.FS.Fsync(f.ctx(ctx), p) }

func (f fixedIdentity) StatFS(ctx context.Context) (namespace.StatFS, error) {
	return f.FS.StatFS(f.ctx(ctx))
}

func (f fixedIdentity) Getxattr(ctx context.Context, p, name string, dest []byte) (int, error) {
	return f.FS.Getxattr(f.ctx(ctx), p, name, dest)
}

func (f fixedIdentity) Setxattr(ctx context.Context, p, name string, value []byte, flags int) error {
	return f.FS.Setxattr(f.ctx(ctx), p, name, value, flags)
}

func (f fixedIdentity) Listxattr(ctx context.Context, p string, dest []byte) (int, error) {
	return f.FS.Listxattr(f.ctx(ctx), p, dest)
}

func (f fixedIdentity) Removexattr(ctx context.Context, p, name string) error {
	return f.FS.Removexattr(f.ctx(ctx), p, name)
}
