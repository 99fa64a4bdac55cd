package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// ErrConnLost is returned for a request whose connection broke before the
// response arrived. It wraps syscall.EIO: the request may or may not have
// been carried out.
var ErrConnLost = fmt.Errorf("connection to cache server lost: %w", syscall.EIO)

// Call is one request.
type Call struct {
	Op   Op
	Cred ident.Cred
	// Args is the encoded arguments of the operation.
	Args []byte
	// Data is the data section of the request. It must not change until
	// the call returns.
	Data []byte
	// Dst, if not nil, receives the data section of the response, which
	// must fit in it.
	Dst []byte
}

// Reply is the answer to a successful call.
type Reply struct {
	// Meta is the metadata section.
	Meta []byte
	// N is the length of the data section. With Call.Dst set, the data is in
	// Dst[:N]; otherwise it is in Data.
	N    int
	Data []byte
	// Link is the connection the reply came on.
	Link Link
}

// Link is a client connection. What a server holds for a connection (pins,
// open writes) ends when it breaks, and Lost tells that it has.
type Link struct{ c *conn }

// Lost reports whether the connection has broken or been closed. It is
// cheap enough to ask before every use of what the server holds.
func (l Link) Lost() bool { return l.c == nil || l.c.lost.Load() }

// Do sends call on this connection, never on another: what the server
// holds for a connection is named by ids that mean something else, or
// nothing, on another one. A lost connection fails with ErrConnLost.
func (l Link) Do(ctx context.Context, call *Call) (Reply, error) {
	if l.Lost() {
		return Reply{}, ErrConnLost
	}
	return l.c.do(ctx, call)
}

// pending is a call waiting for its response. The reader goroutine claims it
// before it reads the data section into dst, so that a caller that gives up
// never has its buffer written after it returned.
type pending struct {
	dst       []byte
	mu        sync.Mutex
	claimed   bool
	abandoned bool
	done      chan struct{}
	reply     Reply
	err       error
}

// conn is one client connection with any number of calls in flight.
type conn struct {
	nc     net.Conn
	w      *frameWriter
	mu     sync.Mutex
	nextID uint64
	calls  map[uint64]*pending
	err    error       // set once the connection is dead
	lost   atomic.Bool // err is set
}

// Answered reports whether err is a server's answer to a request, an errno
// it returned, rather than a failure to send the request or to get the
// answer: a server that answered is done with the request.
func Answered(err error) bool {
	var e syscall.Errno
	return errors.As(err, &e) && err == e //nolint:errorlint // a transport error wraps an errno too
}

// ErrUnreachable is returned, wrapped with the errno of the failure, when
// a server cannot be connected to or does not complete the handshake: the
// call was not sent.
var ErrUnreachable = errors.New("cache server unreachable")

func dialConn(ctx context.Context, addr string, creds Credentials, timeout time.Duration) (*conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 15 * time.Second}
	nc, key, err := greet(addr, creds, func() (net.Conn, error) {
		nc, err := d.DialContext(ctx, network(addr), addr)
		if err != nil {
			return nil, fmt.Errorf("dialing cache server %s: %w: %w", addr, ErrUnreachable, errnoOf(err))
		}
		setSocketBuffers(nc)
		_ = nc.SetDeadline(time.Now().Add(timeout))
		return nc, nil
	})
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	c := &conn{nc: nc, w: newFrameWriter(nc, newSealer(key)), calls: map[uint64]*pending{}}
	go c.readLoop(bufio.NewReaderSize(nc, 256<<10))
	return c, nil
}

// errnoOf turns a dial error into an errno about the connection, which the
// FUSE layer reports for the operation, so that nothing takes it for an
// answer about a file. A Unix socket that is missing, as while a server
// restarts, refuses as a closed port does: passed on as ENOENT, it told
// the kernel that the file was not there, and an open with O_CREAT then
// created it again. Errnos of connections are kept; timeouts and the rest
// become EHOSTUNREACH.
func errnoOf(err error) error {
	var e syscall.Errno
	if !asErrno(err, &e) {
		// The transport error is not wrapped: its own errno must not be
		// taken for the operation's.
		return fmt.Errorf("%v: %w", err, syscall.EHOSTUNREACH) //nolint:errorlint // see above
	}
	switch e {
	case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT:
		return fmt.Errorf("%w", e)
	case syscall.ENOENT:
		return fmt.Errorf("%v: %w", err, syscall.ECONNREFUSED) //nolint:errorlint // see above
	}
	return fmt.Errorf("%v: %w", err, syscall.EHOSTUNREACH) //nolint:errorlint // see above
}

func (c *conn) dead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

func (c *conn) close() { c.fail(ErrConnLost) }

// fail marks the connection dead and wakes every pending call.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		c.lost.Store(true)
	}
	calls := c.calls
	c.calls = map[uint64]*pending{}
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, p := range calls {
		p.mu.Lock()
		claimed := p.claimed
		p.claimed = true
		p.mu.Unlock()
		if !claimed {
			p.err = err
			close(p.done)
		}
	}
}

// do sends call and waits for its response or for ctx to end.
func (c *conn) do(ctx context.Context, call *Call) (Reply, error) {
	p := &pending{dst: call.Dst, done: make(chan struct{})}
	id, err := c.register(p)
	if err != nil {
		return Reply{}, err
	}
	if err := c.send(id, call); err != nil {
		c.fail(fmt.Errorf("%w: %v", ErrConnLost, err)) //nolint:errorlint // a send error's errno is not the operation's
	}
	select {
	case <-p.done:
		p.reply.Link = Link{c}
		return p.reply, p.err
	case <-ctx.Done():
		// A caller that gives up is told EINTR; the server may still
		// carry the request out.
		return c.abandon(id, p, fmt.Errorf("%w: %w", syscall.EINTR, ctx.Err()))
	}
}

func (c *conn) register(p *pending) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	c.nextID++
	c.calls[c.nextID] = p
	return c.nextID, nil
}

// abandon gives up on a call unless the reader already started to fill its
// buffer, in which case it waits for the reader to finish with it.
func (c *conn) abandon(id uint64, p *pending, err error) (Reply, error) {
	p.mu.Lock()
	if p.claimed {
		p.mu.Unlock()
		<-p.done
		return p.reply, p.err
	}
	p.abandoned = true
	p.mu.Unlock()
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
	return Reply{}, err
}

func (c *conn) send(id uint64, call *Call) error {
	var e Encoder
	e.b = getBuf(0)
	meta := e.Cred(call.Cred).b
	meta = append(meta, call.Args...)
	defer putBuf(meta)
	h := header{id: id, code: uint32(call.Op), meta: uint32(len(meta)), dat: uint32(len(call.Data))}
	return c.w.writeFrame(h, meta, call.Data)
}

func (c *conn) readLoop(r *bufio.Reader) {
	hb := make([]byte, headerSize)
	for {
		if err := c.readOne(r, hb); err != nil {
			c.fail(fmt.Errorf("%w: %v", ErrConnLost, err)) //nolint:errorlint // a transport error's errno is not the operation's
			return
		}
	}
}

func (c *conn) readOne(r *bufio.Reader, hb []byte) error {
	h, err := readHeader(r, hb)
	if err != nil {
		return err
	}
	meta := make([]byte, h.meta)
	if _, err := io.ReadFull(r, meta); err != nil {
		return err
	}
	c.mu.Lock()
	p := c.calls[h.id]
	delete(c.calls, h.id)
	c.mu.Unlock()
	if p == nil || !p.claim() {
		_, err := r.Discard(int(h.dat))
		return err
	}
	var streamErr error
	p.reply, p.err, streamErr = receive(r, c.nc, h, meta, p.dst)
	close(p.done)
	return streamErr
}

// claim reports whether the caller is still waiting, and if so keeps it
// waiting until the data section has been received.
func (p *pending) claim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.abandoned || p.claimed {
		return false
	}
	p.claimed = true
	return true
}

// receive reads the data section of a response into dst (or a new buffer).
// It returns the reply, the error of the call, and an error that means the
// stream itself is broken.
func receive(r *bufio.Reader, nc io.Reader, h header, meta, dst []byte) (Reply, error, error) {
	if h.code != 0 {
		if _, err := r.Discard(int(h.dat)); err != nil {
			return Reply{}, ErrConnLost, err
		}
		return Reply{}, syscall.Errno(h.code), nil
	}
	rep := Reply{Meta: meta, N: int(h.dat)}
	if dst == nil {
		rep.Data = make([]byte, h.dat)
		dst = rep.Data
	}
	if int(h.dat) > len(dst) {
		err := fmt.Errorf("%w: reply of %d bytes for a %d-byte buffer", ErrProtocol, h.dat, len(dst))
		return Reply{}, err, err
	}
	if err := readFull(r, nc, dst[:h.dat]); err != nil {
		return Reply{}, ErrConnLost, err
	}
	return rep, nil, nil
}
