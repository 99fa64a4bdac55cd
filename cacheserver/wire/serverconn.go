package wire

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync"
)

// serverConn serves the requests of one connection. The read loop hands each
// request to a worker goroutine; workers stay for the next request rather
// than exit, so that a request pays for neither a new goroutine nor the
// growth of its stack. A worker writes its reply itself (see frameWriter).
type serverConn struct {
	s   *Server
	nc  net.Conn
	w   *frameWriter
	sem chan struct{} // bounds the requests in flight
	// work hands a request to an idle worker; it is unbuffered, so a send
	// succeeds only when a worker waits.
	work chan request
	// workers counts the worker goroutines; only the read loop uses it.
	workers int
	// local is true on a Unix domain socket.
	local bool
	// seal checks the tags of the requests, in the read loop; nil for a
	// first-release client, whose requests carry none.
	seal *sealer
	quit chan struct{}
	wg   sync.WaitGroup
}

// request is a request read off the connection, not yet served.
type request struct {
	h          header
	meta, data []byte
}

func newServerConn(s *Server, nc net.Conn, inFlight int, seal *sealer) *serverConn {
	_, local := nc.(*net.UnixConn)
	return &serverConn{
		s: s, nc: nc, w: newFrameWriter(nc, nil), sem: make(chan struct{}, inFlight),
		work: make(chan request), quit: make(chan struct{}), local: local, seal: seal,
	}
}

func (sc *serverConn) readLoop(ctx context.Context, r *bufio.Reader) error {
	hb := make([]byte, headerSize)
	for {
		h, err := readHeader(r, hb)
		if err != nil {
			return err
		}
		meta := make([]byte, h.meta)
		if _, err := io.ReadFull(r, meta); err != nil {
			return err
		}
		if sc.seal != nil {
			if meta, err = sc.seal.open(hb, meta); err != nil {
				return err
			}
		}
		data := getBuf(int(h.dat))
		if err := readFull(r, sc.nc, data); err != nil {
			return err
		}
		req := request{h: h, meta: meta, data: data}
		if sc.s.Inline != nil && sc.s.Inline(Op(h.code)) {
			sc.serve(ctx, req)
			continue
		}
		sc.dispatch(ctx, req)
	}
}

// dispatch hands req to an idle worker, or to a new one while there are
// fewer workers than requests allowed in flight. Past that it waits for a
// worker: holding a slot of sem, it knows one is idle or about to be.
func (sc *serverConn) dispatch(ctx context.Context, req request) {
	sc.sem <- struct{}{}
	select {
	case sc.work <- req:
		return
	default:
	}
	if sc.workers < cap(sc.sem) {
		sc.workers++
		sc.wg.Add(1)
		go sc.worker(ctx, req)
		return
	}
	sc.work <- req
}

// worker serves req, then the requests handed to it, until stop.
func (sc *serverConn) worker(ctx context.Context, req request) {
	defer sc.wg.Done()
	for {
		sc.serve(ctx, req)
		<-sc.sem
		select {
		case req = <-sc.work:
		case <-sc.quit:
			return
		}
	}
}

// stop waits for the requests being served and ends the workers.
func (sc *serverConn) stop() {
	close(sc.quit)
	sc.wg.Wait()
}

func (sc *serverConn) serve(ctx context.Context, r request) {
	d := NewDecoder(r.meta)
	req := &Request{Op: Op(r.h.code), Cred: d.Cred(), Args: d, Data: r.data, Local: sc.local}
	resp := &Response{}
	if d.Err() != nil {
		resp.Err = d.Err()
	} else {
		sc.s.Handler.ServeWire(ctx, req, resp)
	}
	putBuf(r.data)
	sc.reply(r.h.id, resp)
	if resp.buf != nil {
		putBuf(resp.buf)
	}
}

func (sc *serverConn) reply(id uint64, resp *Response) {
	h := header{id: id}
	var meta, data []byte
	if resp.Err != nil {
		h.code = uint32(Errno(resp.Err))
	} else {
		meta, data = resp.Meta.Bytes(), resp.Data
		h.meta, h.dat = uint32(len(meta)), uint32(len(data))
	}
	// Errors surface in the read loop, which sees the connection die.
	if resp.File != nil {
		defer resp.File.Close()
		if resp.Err == nil {
			h.dat = 0
			if err := sc.w.writeFrameFile(h, meta, resp.File); err != nil {
				_ = sc.nc.Close()
			}
			return
		}
	}
	_ = sc.w.writeFrame(h, meta, data)
}
