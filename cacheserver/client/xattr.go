package client

import (
	"context"

	"github.com/burstcache/burstcache/cacheserver/wire"
)

// Getxattr reads an extended attribute, or its size when dest is empty.
func (f *FS) Getxattr(ctx context.Context, p, name string, dest []byte) (int, error) {
	args := pathArgs(p).String(name).Uint32(uint32(len(dest)))
	return f.sized(ctx, p, wire.OpGetxattr, args, dest)
}

// Listxattr lists extended attribute names, or their size when dest is
// empty.
func (f *FS) Listxattr(ctx context.Context, p string, dest []byte) (int, error) {
	return f.sized(ctx, p, wire.OpListxattr, pathArgs(p).Uint32(uint32(len(dest))), dest)
}

func (f *FS) sized(ctx context.Context, p string, op wire.Op, args *wire.Encoder, dest []byte) (int, error) {
	var dst []byte
	if len(dest) > 0 {
		dst = dest
	}
	rep, err := f.call(ctx, f.layout.MetaServer(p), op, args, nil, dst)
	if err != nil {
		return 0, err
	}
	d := wire.NewDecoder(rep.Meta)
	n := int(d.Uint32())
	return n, d.Err()
}

// Setxattr sets an extended attribute.
func (f *FS) Setxattr(ctx context.Context, p, name string, value []byte, flags int) error {
	args := pathArgs(p).String(name).Uint32(uint32(flags))
	_, err := f.call(context.WithoutCancel(ctx), f.layout.MetaServer(p), wire.OpSetxattr, args, value, nil)
	return err
}

// Removexattr removes an extended attribute.
func (f *FS) Removexattr(ctx context.Context, p, name string) error {
	_, err := f.meta(ctx, p, wire.OpRemovexattr, pathArgs(p).String(name))
	return err
}
