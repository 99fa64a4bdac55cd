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

// SpanReader is a Cache that lets clients on its machine read and write
// cached data in its slab file themselves; the engine is one.
type SpanReader interface {
	ReadSpans(ctx context.Context, path string, off int64, n int) ([]engine.Span, *engine.Pin, error)
	BeginWrite(ctx context.Context, path string, off int64, n int) (*engine.WriteTx, error)
	SlabFile() string
}

// Leaser is a SpanReader that also lends clients on its machine leases on
// extents, which they read from the slab without asking (engine.Lease).
type Leaser interface {
	SpanReader
	LeaseSpans(ctx context.Context, path string, off int64, n int) ([]engine.Span, *engine.Pin, engine.Lease, bool, error)
	SlotGensFile() string
	CountLeaseReads(reads, bytes int64)
}

// ReadAheader is implemented by caches that read the slots of the next
// extents into memory for a reader its client saw read a file in order
// (the last argument of OpReadSpans).
type ReadAheader interface {
	ReadAheadAfter(path string, off int64)
}

// maxHolds bounds the pins and writes one connection holds open; past it
// reads and writes go inline, so that a client that does not end them
// cannot hold the cache.
const maxHolds = 1024

// holdTable holds what the client of one connection holds open: pins of
// slots it reads. Each is ended with true when the client says it is done,
// and with false when the connection closes first.
type holdTable struct {
	mu    sync.Mutex
	next  uint64
	holds map[uint64]func(done bool)
}

type holdTableKey struct{}

// onConn gives every data-path connection its hold table. The pins of a
// connection that Shutdown closed stay: its client may be reading the slots
// still, not yet aware that the connection is gone, while requests of
// other connections finish and could reuse them.
func (s *Server) onConn(ctx context.Context) (context.Context, func()) {
	t := &holdTable{holds: map[uint64]func(bool){}}
	return context.WithValue(ctx, holdTableKey{}, t), func() {
		if s.serving.Load() {
			t.endAll()
		}
	}
}

func holdsOf(ctx context.Context) *holdTable {
	t, _ := ctx.Value(holdTableKey{}).(*holdTable)
	return t
}

// add keeps end and returns its id, or false when the table is full.
func (t *holdTable) add(end func(done bool)) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.holds) >= maxHolds {
		return 0, false
	}
	t.next++
	t.holds[t.next] = end
	return t.next, true
}

// end ends hold id, and reports whether the connection held it.
func (t *holdTable) end(id uint64, done bool) bool {
	t.mu.Lock()
	end, ok := t.holds[id]
	delete(t.holds, id)
	t.mu.Unlock()
	if ok {
		end(done)
	}
	return ok
}

func (t *holdTable) endAll() {
	t.mu.Lock()
	holds := t.holds
	t.holds = map[uint64]func(bool){}
	t.mu.Unlock()
	for _, end := range holds {
		end(false)
	}
}

// inlineOps end what a request in flight may wait for: they are served on
// the connection's read loop, never queued behind the requests in flight.
func inlineOps(op wire.Op) bool { return op == wire.OpUnpin }

// slabFile hands a local client a descriptor of the slab file. The client
// holds the data path's secret, so it may read and write every cached file
// through OpRead and OpWrite already; the descriptor gives it nothing more.
func (s *Server) slabFile(_ context.Context, req *wire.Request, resp *wire.Response) error {
	sr, ok := s.cfg.Cache.(SpanReader)
	if !ok || !req.Local {
		return wire.ErrNotLocal
	}
	return openInto(resp, sr.SlabFile(), os.O_RDONLY)
}

// slotGens hands a local client a read-only descriptor of the slot
// generation file, which says nothing of the cached data.
func (s *Server) slotGens(_ context.Context, req *wire.Request, resp *wire.Response) error {
	l, ok := s.cfg.Cache.(Leaser)
	if !ok || !req.Local || l.SlotGensFile() == "" {
		return wire.ErrNotLocal
	}
	return openInto(resp, l.SlotGensFile(), os.O_RDONLY)
}

func openInto(resp *wire.Response, path string, flag int) error {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return err
	}
	resp.File = f
	return nil
}

// readSpans answers where the bytes of a read are in the slab, or the
// bytes themselves when the slab does not serve them.
func (s *Server) readSpans(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	sr, t, err := s.local(ctx, req)
	if err != nil {
		return err
	}
	p, off, n, err := readRange(req.Args)
	if err != nil {
		return err
	}
	wantLease := req.Args.More() && req.Args.Bool()
	sequential := req.Args.More() && req.Args.Bool()
	// The places handed out are the engine's check: a client reads them
	// itself, and reads its leases without asking.
	if ctx, err = readingFile(ctx, req.Args); err != nil {
		return err
	}
	l, canLease := sr.(Leaser)
	var (
		spans []engine.Span
		pin   *engine.Pin
		lease engine.Lease
		lent  bool
	)
	if wantLease && canLease {
		spans, pin, lease, lent, err = l.LeaseSpans(ctx, p, off, n)
	} else {
		spans, pin, err = sr.ReadSpans(ctx, p, off, n)
	}
	if ra, ok := sr.(ReadAheader); ok && sequential && err == nil {
		ra.ReadAheadAfter(p, off)
	}
	eof := errors.Is(err, io.EOF) || errors.Is(err, fs.ErrNotExist)
	if err != nil && !eof {
		if errors.Is(err, engine.ErrNoSpans) {
			return s.readInline(ctx, p, off, n, resp)
		}
		return err
	}
	var id uint64
	if pin != nil {
		var ok bool
		if id, ok = t.add(func(bool) { pin.Release() }); !ok {
			pin.Release()
			return s.readInline(ctx, p, off, n, resp)
		}
	}
	slab, err := s.slabID(sr)
	if err != nil {
		t.end(id, false)
		return err
	}
	resp.Meta.Bool(eof).Bool(false).Uint64(slab.Dev).Uint64(slab.Ino).Uint64(id).Uint32(uint32(len(spans)))
	for _, sp := range spans {
		resp.Meta.Int64(sp.Off).Uint32(uint32(sp.Len))
	}
	if wantLease {
		resp.Meta.Bool(lent && id != 0)
		if lent && id != 0 {
			resp.Meta.Int64(lease.Off).Uint32(uint32(lease.Valid)).Uint64(lease.Gen).Uint64(lease.Epoch)
		}
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
	eof, err := s.readData(ctx, p, off, n, resp)
	if err != nil {
		return err
	}
	resp.Meta.Bool(eof).Bool(true)
	return nil
}

// local returns the cache, as one that lends its slab, and the hold table
// of the connection, for a request of a client on this machine.
func (s *Server) local(ctx context.Context, req *wire.Request) (SpanReader, *holdTable, error) {
	sr, ok := s.cfg.Cache.(SpanReader)
	t := holdsOf(ctx)
	if !ok || !req.Local || t == nil {
		return nil, nil, wire.ErrNotLocal
	}
	return sr, t, nil
}

// unpin releases pins of this connection.
func (s *Server) unpin(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	t := holdsOf(ctx)
	if t == nil {
		return wire.ErrNotLocal
	}
	for range req.Args.Uint32() {
		id := req.Args.Uint64()
		if req.Args.Err() != nil {
			break
		}
		t.end(id, true)
	}
	if l, ok := s.cfg.Cache.(Leaser); ok && req.Args.More() {
		reads, bytes := req.Args.Uint64(), req.Args.Uint64()
		if req.Args.Err() == nil {
			l.CountLeaseReads(int64(reads), int64(bytes))
		}
	}
	return nil
}
