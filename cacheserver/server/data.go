package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// errDraining is returned for writes to a draining server.
var errDraining = fmt.Errorf("server is draining: %w", syscall.EROFS)

var dataHandlers = map[wire.Op]handlerFunc{
	wire.OpRead:         (*Server).read,
	wire.OpWrite:        (*Server).write,
	wire.OpTrim:         pathSize((Cache).Trim),
	wire.OpExtendSize:   (*Server).extendSize,
	wire.OpDrop:         forgetting(pathOnly((Cache).Drop)),
	wire.OpFlushAndDrop: (*Server).flushAndDrop,
	wire.OpDoom:         (*Server).doom,
	wire.OpEndDoom:      (*Server).endDoom,
	wire.OpHoldDoom:     pathOnly((Cache).HoldDoom),
	wire.OpSync:         settling((Cache).Sync),
	wire.OpStatFS:       (*Server).statFS,
	wire.OpInfo:         (*Server).info,
	wire.OpSlabFile:     (*Server).slabFile,
	wire.OpReadSpans:    (*Server).readSpans,
	wire.OpUnpin:        (*Server).unpin,
	wire.OpSlotGens:     (*Server).slotGens,
	wire.OpWritePipe:    (*Server).writePipe,
	wire.OpWritePiped:   (*Server).writePiped,
	wire.OpWatch:        (*Server).watch,
}

func (s *Server) info(_ context.Context, _ *wire.Request, resp *wire.Response) error {
	i := s.cfg.Info
	resp.Meta.Uint32(uint32(i.Index)).Uint32(uint32(i.Servers)).Int64(i.ExtentSize).String(i.Instance)
	resp.Meta.Bool(s.cfg.LoadBalanced).Bool(true)
	return nil
}

// readPath reads and checks the path argument.
func readPath(d *wire.Decoder) (string, error) {
	p := d.String()
	if err := d.Err(); err != nil {
		return "", err
	}
	return p, namespace.CheckPath(p)
}

// doom begins an unlink of a path; a file it did not keep it forgot, as
// OpDrop does.
func (s *Server) doom(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	var unlink uint64
	if req.Args.More() {
		// A client of an earlier release names no unlink.
		if unlink, err = readUnlinkID(p, req.Args); err != nil {
			return err
		}
	}
	doomed, err := s.cfg.Cache.Doom(ctx, p, unlink)
	if err != nil {
		return err
	}
	if !doomed {
		s.sizes.forget(p)
	}
	resp.Meta.Bool(doomed)
	return nil
}

// readUnlink reads the path and the unlink id of a doom's request.
func readUnlink(d *wire.Decoder) (string, uint64, error) {
	p, err := readPath(d)
	if err != nil {
		return "", 0, err
	}
	unlink, err := readUnlinkID(p, d)
	return p, unlink, err
}

// readUnlinkID reads the id of an unlink of p, which is not 0.
func readUnlinkID(p string, d *wire.Decoder) (uint64, error) {
	unlink := d.Uint64()
	if err := d.Err(); err != nil {
		return 0, err
	}
	if unlink == 0 {
		return 0, fmt.Errorf("an unlink of %s without an id: %w", p, syscall.EINVAL)
	}
	return unlink, nil
}

// unlinkEnds are the engine's names of how an unlink ended.
var unlinkEnds = map[uint32]engine.Unlinked{
	wire.UnlinkRemoved: engine.Removed, wire.UnlinkNotRemoved: engine.NotRemoved, wire.UnlinkMaybeRemoved: engine.MaybeRemoved,
}

// endDoom ends the doom of an unlink, as its removal ended.
func (s *Server) endDoom(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, unlink, err := readUnlink(req.Args)
	if err != nil {
		return err
	}
	end, known := unlinkEnds[req.Args.Uint32()]
	if err := req.Args.Err(); err != nil {
		return err
	}
	if !known {
		return fmt.Errorf("ending a doom of %s: unknown end of an unlink: %w", p, syscall.EINVAL)
	}
	return s.cfg.Cache.EndDoom(ctx, p, unlink, end)
}

func pathOnly(fn func(Cache, context.Context, string) error) handlerFunc {
	return func(s *Server, ctx context.Context, req *wire.Request, _ *wire.Response) error {
		p, err := readPath(req.Args)
		if err != nil {
			return err
		}
		return fn(s.cfg.Cache, ctx, p)
	}
}

func pathSize(fn func(Cache, context.Context, string, int64) error) handlerFunc {
	return func(s *Server, ctx context.Context, req *wire.Request, _ *wire.Response) error {
		p, err := readPath(req.Args)
		if err != nil {
			return err
		}
		return fn(s.cfg.Cache, ctx, p, req.Args.Int64())
	}
}

func (s *Server) read(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, off, n, err := readRange(req.Args)
	if err != nil {
		return err
	}
	if ctx, err = readingFile(ctx, req.Args); err != nil {
		return err
	}
	eof, err := s.readData(ctx, p, off, n, resp)
	if err != nil {
		return err
	}
	resp.Meta.Bool(eof)
	return nil
}

// readRange reads the path, offset and length of a read.
func readRange(d *wire.Decoder) (string, int64, int, error) {
	p, err := readPath(d)
	if err != nil {
		return "", 0, 0, err
	}
	off, n := d.Int64(), int(d.Uint32())
	if n > wire.MaxData {
		return "", 0, 0, syscall.EINVAL
	}
	return p, off, n, nil
}

// readingFile reads the last arguments of a read, the identity of the
// backing file that the client's open of the path found (inode number,
// creation time, generation, change time; a zero inode number: none), and
// marks ctx with it for the engine, which then serves no cached extents
// of a file that this one replaced, or of an earlier version of it
// (engine.ReadingFile). Clients of an earlier release send none, or no
// change time.
func readingFile(ctx context.Context, d *wire.Decoder) (context.Context, error) {
	if !d.More() {
		return ctx, d.Err()
	}
	id := backing.FileID{Ino: d.Uint64(), Birth: d.Int64(), Gen: d.Uint32()}
	if d.More() {
		id.Change = d.Int64()
	}
	if err := d.Err(); err != nil {
		return ctx, err
	}
	return engine.ReadingFile(ctx, id), nil
}

// readData reads n bytes of p at off into the data section of resp, and
// reports whether the read reached the end of the file the server knows.
func (s *Server) readData(ctx context.Context, p string, off int64, n int, resp *wire.Response) (eof bool, err error) {
	buf := resp.Buffer(n)
	got, err := s.cfg.Cache.ReadAt(ctx, p, buf, off)
	// A file this server never saw and the backing store does not hold yet
	// is one whose data lives on other servers: here it is a hole.
	eof = errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist)
	if err != nil && !eof {
		return false, err
	}
	resp.Data = buf[:got]
	return eof, nil
}

func (s *Server) write(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	if s.draining.Load() {
		return errDraining
	}
	off := req.Args.Int64()
	ctx, err = acceptedWrite(ctx, req.Args)
	if err != nil {
		return err
	}
	n, err := s.cfg.Cache.WriteAt(ctx, p, req.Data, off)
	if err != nil {
		return err
	}
	resp.Meta.Uint32(uint32(n)).Uint64(s.incarnation)
	return nil
}

// acceptedWrite reads the last arguments of a write, which say whether
// its bytes come from a client's page cache, and whether it completes a
// write whose later pieces other servers took (a client of an earlier
// release sends neither), and marks ctx for the engine if they do; then
// the backing file that the writer's open found, as for a read.
func acceptedWrite(ctx context.Context, d *wire.Decoder) (context.Context, error) {
	fromPageCache, err := optionalBool(d)
	if err != nil {
		return ctx, err
	}
	completing, err := optionalBool(d)
	if err != nil {
		return ctx, err
	}
	if fromPageCache {
		ctx = engine.Accepted(ctx)
	}
	if completing {
		ctx = engine.Completing(ctx)
	}
	return readingFile(ctx, d)
}

// optionalBool reads a last argument that clients of an earlier release
// do not send: false if it is missing.
func optionalBool(d *wire.Decoder) (bool, error) {
	if !d.More() {
		return false, d.Err()
	}
	b := d.Bool()
	return b, d.Err()
}

// settling runs fn, which makes a path's cached data durable or writes it
// back, and answers the server's incarnation, which the client compares
// with that of the writes it has not made durable: a crash lost what no
// commit covered, and nothing is left to settle of it.
func settling(fn func(Cache, context.Context, string) error) handlerFunc {
	return func(s *Server, ctx context.Context, req *wire.Request, resp *wire.Response) error {
		p, err := readPath(req.Args)
		if err != nil {
			return err
		}
		if err := fn(s.cfg.Cache, ctx, p); err != nil {
			return err
		}
		resp.Meta.Uint64(s.incarnation)
		return nil
	}
}

// flushAndDrop writes back and forgets the cached data of a path, and
// answers as settling does. With keepSizes (see wire.OpFlushAndDrop) it
// writes back and drops only clean data, as an eviction does: the sizes
// that the cache and the size hints hold stay until the client's second
// call, once every server wrote the path back. With keepData as well it
// only writes the dirty data to the backing file, and does not wait for
// the write-back to be made durable there. With keepCounts instead, the
// files keep their places under the limit on files.
func (s *Server) flushAndDrop(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	keepSizes, err := optionalBool(req.Args)
	if err != nil {
		return err
	}
	keepData, err := optionalBool(req.Args)
	if err != nil {
		return err
	}
	keepCounts, err := optionalBool(req.Args)
	if err != nil {
		return err
	}
	switch {
	case keepSizes && keepData:
		err = s.cfg.Cache.WriteOut(ctx, p)
	case keepSizes:
		err = s.cfg.Cache.EvictPath(ctx, p)
	case keepCounts:
		s.sizes.forget(p)
		err = s.cfg.Cache.FlushAndDropKeepingCounts(ctx, p)
	default:
		s.sizes.forget(p)
		err = s.cfg.Cache.FlushAndDrop(ctx, p)
	}
	// A path the cache holds nothing of is written back already.
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	resp.Meta.Uint64(s.incarnation)
	return nil
}

func (s *Server) extendSize(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	size, durable := req.Args.Int64(), req.Args.Bool()
	withdrawn, err := optionalBool(req.Args)
	if err != nil {
		return err
	}
	if withdrawn {
		s.sizes.withdraw(p, size)
		return nil
	}
	if s.draining.Load() {
		return errDraining
	}
	// The size is that of a write, which past the limit is refused even
	// within a file already past it, as write(2) at RLIMIT_FSIZE is.
	if err := s.cfg.Cache.AdmitSize(p, 0, size); err != nil {
		return err
	}
	if !durable {
		s.sizes.note(p, size)
		return nil
	}
	if err := s.cfg.Cache.ExtendSize(ctx, p, size); err != nil {
		return err
	}
	s.sizes.settled(p, size)
	return nil
}

// statFS reports the server's cache as the capacity of the file system, and
// the backing file system's inode counts.
func (s *Server) statFS(ctx context.Context, _ *wire.Request, resp *wire.Response) error {
	st, err := s.cfg.NS.StatFS(ctx)
	if err != nil {
		return err
	}
	cs := s.cfg.Cache.Stats()
	if st.Bsize == 0 {
		st.Bsize = 4096
	}
	bs := int64(st.Bsize)
	st.Blocks = uint64(cs.CapacityBytes / bs)
	free := max(cs.CapacityBytes-cs.DirtyBytes, 0)
	st.Bfree, st.Bavail = uint64(free/bs), uint64(free/bs)
	resp.Meta.StatFS(st)
	return nil
}
