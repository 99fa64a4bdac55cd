package server

import (
	"context"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

func (s *Server) getxattr(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	name, size := req.Args.String(), int(req.Args.Uint32())
	var dest []byte
	if size > 0 {
		dest = resp.Buffer(min(size, wire.MaxData))
	}
	n, err := s.cfg.NS.Getxattr(ctx, p, name, dest)
	if err != nil {
		return err
	}
	resp.Meta.Uint32(uint32(n))
	if size > 0 {
		resp.Data = dest[:n]
	}
	return nil
}

func (s *Server) setxattr(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	name, flags := req.Args.String(), int(req.Args.Uint32())
	return s.attrsChanged(ctx, s.cfg.NS.Setxattr(ctx, p, name, req.Data, flags), p)
}

func (s *Server) listxattr(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	size := int(req.Args.Uint32())
	var dest []byte
	if size > 0 {
		dest = resp.Buffer(min(size, wire.MaxData))
	}
	n, err := s.cfg.NS.Listxattr(ctx, p, dest)
	if err != nil {
		return err
	}
	resp.Meta.Uint32(uint32(n))
	if size > 0 {
		resp.Data = dest[:n]
	}
	return nil
}

func (s *Server) removexattr(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	return s.attrsChanged(ctx, s.cfg.NS.Removexattr(ctx, p, req.Args.String()), p)
}

// probeXattrs answers, after the attributes of p, what a getxattr of each
// extended attribute named in args would answer (wire.OpGetAttr): a size
// query as the caller, which the backing file system checks as it checks
// the caller's own getxattr. Malformed names, or none, get no answer.
func (s *Server) probeXattrs(ctx context.Context, p string, args *wire.Decoder, resp *wire.Response) {
	if !args.More() {
		return
	}
	n := min(args.Uint32(), wire.MaxXattrProbes)
	names := make([]string, 0, n)
	for range n {
		names = append(names, args.String())
	}
	if args.Err() != nil {
		return
	}
	resp.Meta.Uint32(uint32(len(names)))
	for _, name := range names {
		_, err := s.cfg.NS.Getxattr(ctx, p, name, nil)
		resp.Meta.Uint32(uint32(namespace.Errno(err)))
	}
}
