package server

import (
	"context"
	"errors"
	"io"
	"path"

	"github.com/burstcache/burstcache/cacheserver/placement"
)

// preload copies up the extents this server holds of the file p, or of
// every file under the directory p: its share of the extents when striped,
// every extent when load-balanced.
func (s *Server) preload(ctx context.Context, p string) error {
	a, err := s.cfg.NS.GetAttr(ctx, p)
	if err != nil {
		return err
	}
	if a.IsRegular() {
		return s.preloadFile(ctx, p, a.Size)
	}
	if !a.IsDir() {
		return nil
	}
	es, err := s.cfg.NS.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := s.preload(ctx, path.Join(p, e.Name)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) preloadFile(ctx context.Context, p string, size int64) error {
	l := placement.Layout{Servers: s.cfg.Info.Servers, ExtentSize: s.cfg.Info.ExtentSize}
	buf := make([]byte, l.ExtentSize)
	for e := int64(0); e*l.ExtentSize < size; e++ {
		if !s.cfg.LoadBalanced && l.ExtentServer(p, e) != s.cfg.Info.Index {
			continue
		}
		_, err := s.cfg.Cache.ReadAt(ctx, p, buf, e*l.ExtentSize)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	return nil
}
