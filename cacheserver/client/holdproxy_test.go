package client

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/wire"
)

// holdProxy sits between clients and one server and holds back the requests
// that its hold function picks, until the test releases them. Other requests
// of the same connection pass: the protocol lets them overtake.
type holdProxy struct {
	addr string
	hold func(op wire.Op, args *wire.Decoder) bool
	// held receives every request held back.
	held chan heldRequest
	// forwarded receives the operation of every request passed on.
	forwarded chan wire.Op
	// answered receives the request id of every response to a request
	// that was held, once the response has passed.
	answered chan uint64
	// holdAnswer, if set, picks the requests whose answers the proxy
	// holds back on their way to the client, into heldAnswers.
	holdAnswer  func(op wire.Op) bool
	heldAnswers chan heldRequest

	mu     sync.Mutex
	heldID map[uint64]bool
	// conns are the connections open through the proxy; with refusing
	// set, it closes new ones at once (cut).
	conns    []net.Conn
	refusing bool
	// cuts counts the calls of cut: a request held on a connection
	// accepted before the last one is dead.
	cuts int
}

// cut closes every connection through the proxy, with the requests held on
// them, and refuses new ones until heal: to the client, the server is gone.
func (p *holdProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = true
	p.cuts++
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// live reports whether h was held on a connection that no cut closed.
func (p *holdProxy) live(h heldRequest) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return h.cuts == p.cuts
}

// heal lets connections through again.
func (p *holdProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = false
}

// heldRequest is a request frame held back on its way to the server.
type heldRequest struct {
	id    uint64
	op    wire.Op
	args  *wire.Decoder
	frame []byte
	to    *lockedWriter
	cuts  int // the proxy's cuts when its connection was accepted
}

// lockedWriter serializes frames written to one server connection.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) write(b []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(b)
	return err
}

// release sends a held request on to the server, or a held answer on to
// the client.
func (h heldRequest) release(t *testing.T) {
	t.Helper()
	if err := h.to.write(h.frame); err != nil {
		t.Fatalf("releasing a held request: %v", err)
	}
}

const (
	// handshakeAnswer is the client's part of the handshake (see package
	// wire): magic, nonce and MAC.
	handshakeAnswer = 4 + 32 + 32
	// handshakeHello and handshakeVerdict are the server's parts: magic
	// and nonce, then an errno and a MAC.
	handshakeHello   = 4 + 32
	handshakeVerdict = 4 + 32
	frameHeader      = 20
)

func startHoldProxy(t *testing.T, server string, hold func(wire.Op, *wire.Decoder) bool) *holdProxy {
	t.Helper()
	return startProxy(t, server, hold, nil)
}

// startProxy starts a proxy that holds the requests hold picks and the
// answers to those holdAnswer picks; either may be nil.
func startProxy(t *testing.T, server string, hold func(wire.Op, *wire.Decoder) bool, holdAnswer func(wire.Op) bool) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{addr: ln.Addr().String(), hold: hold, holdAnswer: holdAnswer, held: make(chan heldRequest, 16),
		forwarded: make(chan wire.Op, 1024), answered: make(chan uint64, 16), heldID: map[uint64]bool{},
		heldAnswers: make(chan heldRequest, 16)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			refusing := p.refusing
			p.mu.Unlock()
			if refusing {
				_ = c.Close()
				continue
			}
			s, err := net.Dial("tcp", server)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			cuts := p.cuts
			p.mu.Unlock()
			// The requests of this connection whose answers are held, by id.
			var answers sync.Map
			wg.Go(func() { p.responses(s, &lockedWriter{w: c}, &answers); _ = c.Close() })
			wg.Go(func() { p.requests(c, &lockedWriter{w: s}, &answers, cuts); _ = s.Close() })
		}
	})
	return p
}

// requests forwards the handshake answer as it is, then frame by frame.
func (p *holdProxy) requests(from io.Reader, to *lockedWriter, answers *sync.Map, cuts int) {
	hs := make([]byte, handshakeAnswer)
	if _, err := io.ReadFull(from, hs); err != nil || to.write(hs) != nil {
		return
	}
	for {
		frame, err := readFrame(from)
		if err != nil {
			return
		}
		id, op := binary.LittleEndian.Uint64(frame), wire.Op(binary.LittleEndian.Uint32(frame[8:]))
		meta := frame[frameHeader : frameHeader+binary.LittleEndian.Uint32(frame[12:])]
		if d := wire.NewDecoder(meta); p.hold != nil && p.hold(op, argsOf(d)) {
			p.mu.Lock()
			p.heldID[id] = true
			p.mu.Unlock()
			p.held <- heldRequest{id: id, op: op, args: argsOf(wire.NewDecoder(meta)), frame: frame, to: to, cuts: cuts}
			continue
		}
		if p.holdAnswer != nil && p.holdAnswer(op) {
			answers.Store(id, op)
		}
		// Told before it is passed on, so that a test that saw the answer
		// finds the request here.
		select {
		case p.forwarded <- op:
		default: // nobody watches this many requests
		}
		if to.write(frame) != nil {
			return
		}
	}
}

// responses forwards the server's side of the handshake and its responses.
func (p *holdProxy) responses(from io.Reader, to *lockedWriter, answers *sync.Map) {
	for _, n := range []int{handshakeHello, handshakeVerdict} {
		hs := make([]byte, n)
		if _, err := io.ReadFull(from, hs); err != nil {
			return
		}
		if to.write(hs) != nil {
			return
		}
	}
	for {
		frame, err := readFrame(from)
		if err != nil {
			return
		}
		id := binary.LittleEndian.Uint64(frame)
		if op, ok := answers.LoadAndDelete(id); ok {
			p.heldAnswers <- heldRequest{id: id, op: op.(wire.Op), frame: frame, to: to}
			continue
		}
		if to.write(frame) != nil {
			return
		}
		p.mu.Lock()
		held := p.heldID[id]
		p.mu.Unlock()
		if held {
			p.answered <- id
		}
	}
}

// argsOf skips the caller's identity that starts every request.
func argsOf(d *wire.Decoder) *wire.Decoder {
	d.Cred()
	return d
}

func readFrame(r io.Reader) ([]byte, error) {
	h := make([]byte, frameHeader)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(h[12:])) + int(binary.LittleEndian.Uint32(h[16:]))
	if n > wire.MaxMeta+wire.MaxData {
		return nil, errors.New("frame too large")
	}
	frame := make([]byte, frameHeader+n)
	copy(frame, h)
	_, err := io.ReadFull(r, frame[frameHeader:])
	return frame, err
}
