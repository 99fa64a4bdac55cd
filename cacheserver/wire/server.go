package wire

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// Request is a request as a Handler sees it.
type Request struct {
	Op   Op
	Cred ident.Cred
	// Args decodes the arguments that follow the identity.
	Args *Decoder
	// Data is the data section. It is valid only until the handler returns.
	Data []byte
	// Local is true when the client is on this machine, connected over a
	// Unix domain socket, and may be sent descriptors (Response.File).
	Local bool
}

// Response is what a Handler answers.
type Response struct {
	// Meta holds the results that go in the metadata section.
	Meta Encoder
	// Data is sent as the data section after the handler returns.
	Data []byte
	// Err, when not nil, is sent as its errno (EIO if it carries none) and
	// Meta and Data are dropped.
	Err error
	// File, when not nil, is passed to a Local client with the response
	// (SCM_RIGHTS), which then carries no data section. The server closes
	// it once sent.
	File *os.File
	buf  []byte
}

// Buffer returns a scratch buffer of n bytes that stays valid until the
// response has been sent, typically to read file data into before setting
// Data to a prefix of it.
func (r *Response) Buffer(n int) []byte {
	r.buf = getBuf(n)
	return r.buf
}

// Handler serves requests. ServeWire is called concurrently, once per
// request, and must set resp.Err for a failed request.
type Handler interface {
	ServeWire(ctx context.Context, req *Request, resp *Response)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request, resp *Response)

// ServeWire calls f.
func (f HandlerFunc) ServeWire(ctx context.Context, req *Request, resp *Response) { f(ctx, req, resp) }

// Server accepts connections and serves their requests with Handler.
type Server struct {
	Handler Handler
	// Secret is the shared secret clients must prove they hold; empty
	// admits every client.
	Secret []byte
	// MountKeys, if not empty, admit only clients that sign the handshake
	// with the private key of one of them (Credentials.MountKey) besides
	// proving Secret: mounts of the node plugin that holds the key, not
	// everyone who can read the instance's Secret. A server that acts as
	// its callers believes the identities a client sends.
	MountKeys []ed25519.PublicKey
	// InFlight bounds the requests served at once per connection; 0 means 64.
	InFlight int
	Log      *slog.Logger
	// OnConn, if set, is called when a client has connected and passed the
	// handshake. The context it returns is the one the connection's
	// requests are served with, and end is called once the connection has
	// closed and its last request has returned: a handler keeps state of
	// one connection, such as resources the client holds, in the context.
	OnConn func(ctx context.Context) (cctx context.Context, end func())
	// Inline, if set, reports operations that are served on the
	// connection's read loop itself, outside the bound on requests in
	// flight: quick ones that never wait, which requests in flight may
	// wait for (the end of something an earlier request started).
	Inline func(op Op) bool

	refused atomic.Uint64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	ln     net.Listener
	closed bool
	wg     sync.WaitGroup
	// base is the context every connection's requests derive from; Shutdown
	// cancels it when its own context ends first.
	base   context.Context
	cancel context.CancelFunc
}

// Refused returns how many connections the server closed because the peer
// did not prove the secret, or sent a request its connection did not tag.
func (s *Server) Refused() uint64 { return s.refused.Load() }

// Serve accepts connections on ln until Close is called. It returns nil
// after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln, s.conns = ln, map[net.Conn]struct{}{}
	s.initLocked()
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			return err
		}
		if !s.track(c) {
			_ = c.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.serveConn(c)
		}()
	}
}

// Close stops accepting, closes every connection and waits until the
// requests being served have returned.
func (s *Server) Close() error { return s.Shutdown(context.Background()) }

// ErrRequestsCancelled is returned by Shutdown when requests still ran at
// the end of its context and were cancelled.
var ErrRequestsCancelled = errors.New("requests still being served were cancelled")

// Shutdown is Close with a bound: the requests being served may finish
// until ctx ends, and are then cancelled, through their context, and
// waited for. A request waiting for something that may never come, such
// as cache space held by dirty data that a broken backing store keeps from
// being written back, would otherwise hold the shutdown for good. Their
// connections are closed first, so no client hears of a request either
// way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.initLocked()
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	cancel := s.cancel
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	cancel()
	<-done
	return ErrRequestsCancelled
}

func (s *Server) initLocked() {
	if s.base == nil {
		s.base, s.cancel = context.WithCancel(context.Background())
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func (s *Server) serveConn(c net.Conn) {
	setSocketBuffers(c)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	key, err := serverHandshake(c, s.Secret, s.MountKeys)
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrMountKeyRefused) {
			s.refused.Add(1)
		}
		s.log().Warn("Refusing client", "remote", c.RemoteAddr(), "err", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(base)
	defer cancel()
	gone := make(chan struct{})
	ctx = context.WithValue(ctx, goneKey{}, gone)
	if s.OnConn != nil {
		var end func()
		ctx, end = s.OnConn(ctx)
		defer end()
	}
	inFlight := s.InFlight
	if inFlight <= 0 {
		inFlight = 64
	}
	var seal *sealer
	if key != nil {
		seal = newSealer(key)
	}
	sc := newServerConn(s, c, inFlight, seal)
	err = sc.readLoop(ctx, bufio.NewReaderSize(c, 256<<10))
	close(gone)
	sc.stop()
	if errors.Is(err, ErrForged) {
		s.refused.Add(1)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.log().Warn("Closing connection", "remote", c.RemoteAddr(), "err", err)
	}
}

type goneKey struct{}

// ConnGone returns a channel that is closed once the connection whose
// request ctx serves has stopped reading requests; nil for a context of no
// connection. A handler that may wait long for something other than its
// own work (OpWatch) must end its wait then: the connection closes only
// after its last request returned, and nobody would read the answer.
func ConnGone(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(goneKey{}).(chan struct{})
	return c
}

// Errno returns the errno that err carries, or EIO.
func Errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 {
		return e
	}
	return syscall.EIO
}

// setSocketBuffers turns off Nagle's algorithm: frames are flushed whole and
// a small metadata reply must not wait for an acknowledgement.
func setSocketBuffers(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
}
