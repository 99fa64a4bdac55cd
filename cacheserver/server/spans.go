package server

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// SpanReader is a Cache that lets clients on its machine read cached data
// from its slab file themselves; the engine is one.
type SpanReader interface {
	ReadSpans(ctx context.Context, path string, off int64, n int) ([]engine.Span, *engine.Pin, error)
	SlabFile() string
}

// maxPins bounds the pins one connection holds; past it reads come inline,
// so that a client that does not release its pins cannot hold the cache.
const maxPins = 1024

// pinTable holds the pins of one connection, released when it closes.
type pinTable struct {
	mu   sync.Mutex
	next uint64
	pins map[uint64]*engine.Pin
}

type pinTableKey struct{}

// onConn gives every data-path connection its pin table.
func (s *Server) onConn(ctx context.Context) (context.Context, func()) {
	t := &pinTable{pins: map[uint64]*engine.Pin{}}
	return context.WithValue(ctx, pinTableKey{}, t), t.releaseAll
}

func pinsOf(ctx context.Context) *pinTable {
	t, _ := ctx.Value(pinTableKey{}).(*pinTable)
	return t
}

// add keeps p and returns its id, or false when the table is full.
func (t *pinTable) add(p *engine.Pin) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pins) >= maxPins {
		return 0, false
	}
	t.next++
	t.pins[t.next] = p
	return t.next, true
}

func (t *pinTable) release(id uint64) {
	t.mu.Lock()
	p := t.pins[id]
	delete(t.pins, id)
	t.mu.Unlock()
	p.Release()
}

func (t *pinTable) releaseAll() {
	t.mu.Lock()
	pins := t.pins
	t.pins = map[uint64]*engine.Pin{}
	t.mu.Unlock()
	for _, p := range pins {
		p.Release()
	}
}

// slabFile hands a local client a read-only descriptor of the slab file.
// The client holds the data path's secret, so it may read every cached byte
// through OpRead already; the descriptor gives it nothing more.
func (s *Server) slabFile(_ context.Context, req *wire.Request, resp *wire.Response) error {
	sr, ok := s.cfg.Cache.(SpanReader)
	if !ok || !req.Local {
		return wire.ErrNotLocal
	}
	f, err := os.Open(sr.SlabFile())
	if err != nil {
		return err
	}
	resp.File = f
	return nil
}

// readSpans answers where the bytes of a read are in the slab, or the
// bytes themselves when the slab does not serve them.
func (s *Server) readSpans(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	sr, ok := s.cfg.Cache.(SpanReader)
	t := pinsOf(ctx)
	if !ok || !req.Local || t == nil {
		return wire.ErrNotLocal
	}
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	off, n := req.Args.Int64(), int(req.Args.Uint32())
	if n > wire.MaxData {
		return syscall.EINVAL
	}
	spans, pin, err := sr.ReadSpans(ctx, p, off, n)
	eof := errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist)
	if err != nil && !eof {
		if errors.Is(err, engine.ErrNoSpans) {
			return s.readInline(ctx, p, off, n, resp)
		}
		return err
	}
	var id uint64
	if pin != nil {
		if id, ok = t.add(pin); !ok {
			pin.Release()
			return s.readInline(ctx, p, off, n, resp)
		}
	}
	slab, err := s.slabID(sr)
	if err != nil {
		t.release(id)
		return err
	}
	resp.Meta.Bool(eof).Bool(false).Uint64(slab.Dev).Uint64(slab.Ino).Uint64(id).Uint32(uint32(len(spans)))
	for _, sp := range spans {
		resp.Meta.Int64(sp.Off).Uint32(uint32(sp.Len))
	}
	return nil
}

// SlabID identifies a slab file, so that a client can tell whether the
// descriptor it holds is of the file a server's spans refer to.
type SlabID struct{ Dev, Ino uint64 }

// slabID returns the identity of the slab file, learned once.
func (s *Server) slabID(sr SpanReader) (SlabID, error) {
	s.slabOnce.Do(func() {
		var st syscall.Stat_t
		if s.slabErr = syscall.Stat(sr.SlabFile(), &st); s.slabErr == nil {
			s.slab = SlabID{Dev: st.Dev, Ino: st.Ino}
		}
	})
	return s.slab, s.slabErr
}

// readInline answers an OpReadSpans with the bytes, as OpRead does.
func (s *Server) readInline(ctx context.Context, p string, off int64, n int, resp *wire.Response) error {
	buf := resp.Buffer(n)
	got, err := s.cfg.Cache.ReadAt(ctx, p, buf, off)
	eof := errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist)
	if err != nil && !eof {
		return err
	}
	resp.Data = buf[:got]
	resp.Meta.Bool(eof).Bool(true)
	return nil
}

// unpin releases pins of this connection.
func (s *Server) unpin(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	t := pinsOf(ctx)
	if t == nil {
		return wire.ErrNotLocal
	}
	for range req.Args.Uint32() {
		id := req.Args.Uint64()
		if req.Args.Err() != nil {
			break
		}
		t.release(id)
	}
	return nil
}
