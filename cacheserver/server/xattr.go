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

// probeNames reads the names of extended attributes that an OpGetAttr
// asks about after its path, the first wire.MaxXattrProbes of them.
func probeNames(args *wire.Decoder) ([]string, error) {
	if !args.More() {
		return nil, nil
	}
	n := min(args.Uint32(), wire.MaxXattrProbes)
	names := make([]string, 0, n)
	for range n {
		names = append(names, args.String())
	}
	return names, args.Err()
}

// getAttrProbing returns the attributes of p and what a getxattr of each
// of names as the caller would return (wire.OpGetAttr): a size query,
// which the backing file system checks as it checks the caller's own
// getxattr. A namespace.XattrProber makes them in one call.
func (s *Server) getAttrProbing(ctx context.Context, p string, names []string) (namespace.Attr, []error, error) {
	if prober, ok := s.cfg.NS.(namespace.XattrProber); ok && len(names) > 0 {
		return prober.GetAttrProbing(ctx, p, names)
	}
	a, err := s.cfg.NS.GetAttr(ctx, p)
	if err != nil || len(names) == 0 {
		return a, nil, err
	}
	errs := make([]error, len(names))
	for i, name := range names {
		_, errs[i] = s.cfg.NS.Getxattr(ctx, p, name, nil)
	}
	return a, errs, nil
}

// answerProbes encodes the answers of getAttrProbing.
func answerProbes(resp *wire.Response, errs []error) {
	resp.Meta.Uint32(uint32(len(errs)))
	for _, err := range errs {
		resp.Meta.Uint32(uint32(namespace.Errno(err)))
	}
}
