package wire

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultDialTimeout bounds how long a client waits to connect to and
// authenticate with a server, so that an unreachable server is reported
// quickly instead of hanging the caller.
const DefaultDialTimeout = 3 * time.Second

// Client sends calls to one server over a small pool of connections, dialled
// on first use and again after a connection breaks.
type Client struct {
	addr    string
	creds   Credentials
	timeout time.Duration
	next    atomic.Uint64
	slots   []slot
	caps    atomic.Bool
}

type slot struct {
	mu sync.Mutex
	c  *conn
}

// ClientOptions configure a Client.
type ClientOptions struct {
	// Secret is the shared secret of the servers.
	Secret []byte
	// MountKey signs the handshake, for servers that admit only mounts
	// (Credentials.MountKey).
	MountKey ed25519.PrivateKey
	// Conns is the number of connections; 0 means DefaultConns.
	Conns int
	// DialTimeout bounds a dial and handshake; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
}

// DefaultConns is how many connections a Client keeps to its server
// unless told otherwise.
const DefaultConns = 4

// NewClient returns a client of the server at addr. It does not connect yet.
func NewClient(addr string, opts ClientOptions) *Client {
	if opts.Conns <= 0 {
		opts.Conns = DefaultConns
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	return &Client{addr: addr, creds: Credentials{Secret: opts.Secret, MountKey: opts.MountKey}, timeout: opts.DialTimeout, slots: make([]slot, opts.Conns)}
}

// Addr returns the address of the server.
func (cl *Client) Addr() string { return cl.addr }

// SendCaps tells the client whether its server takes the capabilities of
// callers (OpInfo says). Until it is told so, the client leaves them out of
// its calls: a server of an earlier release cannot read them, and runs
// each call with what the caller's uid gives.
func (cl *Client) SendCaps(on bool) { cl.caps.Store(on) }

// Do sends call and waits for the reply. An errno from the server is
// returned as a syscall.Errno; a broken connection as ErrConnLost. Calls are
// not retried, since not every operation is idempotent; the next call after
// a connection broke dials a new one.
func (cl *Client) Do(ctx context.Context, call *Call) (Reply, error) {
	if call.Cred.HasCaps && !cl.caps.Load() {
		c := *call
		c.Cred.Caps, c.Cred.HasCaps = 0, false
		call = &c
	}
	s := &cl.slots[cl.next.Add(1)%uint64(len(cl.slots))]
	c, err := s.get(ctx, cl)
	if err != nil {
		return Reply{}, err
	}
	rep, err := c.do(ctx, call)
	return rep, cl.wrap(call.Op, err)
}

func (cl *Client) wrap(op Op, err error) error {
	var e syscall.Errno
	if err == nil || (errors.As(err, &e) && err == e) { //nolint:errorlint // a bare errno from the server stays bare
		return err
	}
	return fmt.Errorf("op %d on %s: %w", op, cl.addr, err)
}

func (s *slot) get(ctx context.Context, cl *Client) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil && !s.c.dead() {
		return s.c, nil
	}
	c, err := dialConn(ctx, cl.addr, cl.creds, cl.timeout)
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// Close closes every connection; calls in flight fail with ErrConnLost.
func (cl *Client) Close() error {
	for i := range cl.slots {
		s := &cl.slots[i]
		s.mu.Lock()
		if s.c != nil {
			s.c.close()
			s.c = nil
		}
		s.mu.Unlock()
	}
	return nil
}

func asErrno(err error, e *syscall.Errno) bool { return errors.As(err, e) }
