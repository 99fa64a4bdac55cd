package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Protocol is how a server's control API authenticates calls and answers.
// A client speaks the protocol it is made for and never changes it on the
// word of an answer, which anyone at the server's address could send: the
// caller learns a server's protocol from a source it trusts, such as the
// pod spec that the manager wrote (see NewClientFor).
type Protocol int

// Protocols, oldest first.
const (
	// ProtocolBearer is that of servers of the first release: each call
	// carries the same bearer token, which anyone who sees it go by can
	// send to those servers, and answers are not signed.
	ProtocolBearer Protocol = 1
	// ProtocolSignedCalls is that of servers of the release after: each
	// call is signed once (see authScheme), but answers are not, so
	// whoever answers at the server's address is believed.
	ProtocolSignedCalls Protocol = 2
	// ProtocolSigned is that of servers of the release after that: calls
	// are signed, and so are the answers to them (see answerHeader), but
	// a call names no server, so that one seen on its way to a server can
	// be sent to another server of the instance, which holds the same
	// secret.
	ProtocolSigned Protocol = 3
	// ProtocolAddressed is that of servers of this release: calls and
	// answers are signed as in ProtocolSigned, and their signatures name
	// the server the call is meant for (see authScheme), which refuses
	// calls meant for another.
	ProtocolAddressed Protocol = 4
)

// CurrentProtocol is the protocol servers of this release speak.
const CurrentProtocol = ProtocolAddressed

// ParseProtocol reads a protocol as String writes it.
func ParseProtocol(s string) (Protocol, error) {
	n, err := strconv.Atoi(s)
	if p := Protocol(n); err == nil && p >= ProtocolBearer && p <= CurrentProtocol {
		return p, nil
	}
	return 0, fmt.Errorf("unknown control protocol %q: this release knows %d to %d", s, ProtocolBearer, CurrentProtocol)
}

// String returns the protocol's number.
func (p Protocol) String() string { return strconv.Itoa(int(p)) }

// Client calls the control API of one server.
type Client struct {
	base string
	http *http.Client
	// secret signs every call; nil for a server that has none.
	secret []byte
	proto  Protocol
	index  int
}

// Server is what a caller must know of a server to call it, from a source
// it trusts: the manager knows it from the pod it made for the server,
// `burstcache local` from its state.
type Server struct {
	// Addr is the server's control address, "host:port" or a URL.
	Addr string
	// Index is the server's index in its instance, which the signatures
	// of ProtocolAddressed name.
	Index int
	// Protocol is the protocol the server speaks. A client of an older
	// protocol believes unsigned answers, or answers of any server of
	// the instance, and one of ProtocolBearer sends a token that anyone
	// who sees it can use against servers of that protocol.
	Protocol Protocol
}

// NewClient returns a client of the control API at addr ("host:port" or a
// URL) of the first server of an instance, or its only one (index 0),
// that proves it holds secret, the instance's shared secret (nil for a
// server that has none), and takes only answers signed with it
// (CurrentProtocol). A nil hc means http.DefaultClient; give one with a
// timeout for calls other than Flush and Drain, which block until the
// flush ends.
func NewClient(addr string, secret []byte, hc *http.Client) *Client {
	return NewClientFor(Server{Addr: addr, Protocol: CurrentProtocol}, secret, hc)
}

// NewClientFor returns a client as NewClient does, of server s.
func NewClientFor(s Server, secret []byte, hc *http.Client) *Client {
	addr := s.Addr
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(addr, "/"), http: hc, secret: secret, proto: s.Protocol, index: s.Index}
}

// Flush writes back every dirty byte of the server. It blocks until the
// flush ends or ctx does. An incomplete flush returns the bytes left and an
// error matching ErrFlushIncomplete.
func (c *Client) Flush(ctx context.Context) (FlushResult, error) {
	return c.flush(ctx, "flush")
}

// Drain makes the server refuse new writes with EROFS, then flushes as
// Flush does.
func (c *Client) Drain(ctx context.Context) (FlushResult, error) {
	return c.flush(ctx, "drain")
}

// Discard makes the server refuse new writes with EROFS and remove its
// cache files when it stops, with the data not written back. Only a
// teardown that drops unwritten data, as the instance's owner asked, calls
// it.
func (c *Client) Discard(ctx context.Context) error {
	return c.call(ctx, "discard", http.MethodPost, "/v1/discard", nil, nil)
}

// RemoveHidden has the server remove the hidden names of files unlinked
// while open that mounts left behind (see Service.RemoveHidden). Only the
// teardown of an instance calls it, after draining every server.
func (c *Client) RemoveHidden(ctx context.Context) (HiddenResult, error) {
	var res HiddenResult
	err := c.call(ctx, "remove hidden names", http.MethodPost, "/v1/hidden/remove", nil, &res)
	if e := (*Error)(nil); errors.As(err, &e) {
		res.Removed, res.GivenBack = e.Body.Removed, e.Body.GivenBack
	}
	return res, err
}

func (c *Client) flush(ctx context.Context, op string) (FlushResult, error) {
	var res FlushResult
	err := c.call(ctx, op, http.MethodPost, "/v1/"+op, nil, &res)
	if e := (*Error)(nil); errors.As(err, &e) {
		res.RemainingBytes, res.Error = e.Body.RemainingBytes, e.Body.Error
	}
	return res, err
}

// FlushPath writes back the dirty data of path.
func (c *Client) FlushPath(ctx context.Context, path string) error {
	return c.pathCall(ctx, "flush path", "/v1/paths/flush", path, nil)
}

// EvictPath drops the clean cached data of path.
func (c *Client) EvictPath(ctx context.Context, path string) error {
	return c.pathCall(ctx, "evict path", "/v1/paths/evict", path, nil)
}

// InvalidatePath forgets the clean cached data of path, so that changes made
// to the backing store behind the cache's back are seen.
func (c *Client) InvalidatePath(ctx context.Context, path string) error {
	return c.pathCall(ctx, "invalidate path", "/v1/paths/invalidate", path, nil)
}

// Preload copies the extents of path that this server holds up from the
// backing store. It blocks until they are all in the cache or ctx ends;
// Stats shows the progress meanwhile.
func (c *Client) Preload(ctx context.Context, path string) (PreloadResult, error) {
	var res PreloadResult
	err := c.pathCall(ctx, "preload", "/v1/paths/preload", path, &res)
	return res, err
}

// pathCall makes a call about path. A path that is not valid UTF-8 goes as
// its bytes (see Path), which servers of earlier releases refuse as a body
// they cannot decode: the error then says so.
func (c *Client) pathCall(ctx context.Context, op, route, path string, out any) error {
	err := c.call(ctx, op, http.MethodPost, route, PathRequest{Path: Path(path)}, out)
	if err != nil && !utf8.ValidString(path) && errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%w (the path %q is not valid UTF-8, which servers of earlier releases refuse)", err, path)
	}
	return err
}

// Stats returns the server's statistics.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := c.call(ctx, "stats", http.MethodGet, "/v1/stats", nil, &st)
	return st, err
}

// SetTunables changes the server's knobs.
func (c *Client) SetTunables(ctx context.Context, t Tunables) error {
	return c.call(ctx, "set tunables", http.MethodPut, "/v1/tunables", t, nil)
}

// trustsOnlySignedAnswers says whether the client takes only signed
// answers: always but for the protocols of earlier releases, which sign
// none, and for a server without a secret, which has none to sign with.
func (c *Client) trustsOnlySignedAnswers() bool {
	return len(c.secret) > 0 && c.proto != ProtocolBearer && c.proto != ProtocolSignedCalls
}

// authorize signs req, whose body is body, as the server takes it, and
// returns the time and nonce of the call (zero when it is not signed).
func (c *Client) authorize(req *http.Request, body []byte) callID {
	switch {
	case len(c.secret) == 0:
		return callID{}
	case c.proto == ProtocolBearer:
		req.Header.Set("Authorization", legacyAuth(c.secret))
		return callID{}
	}
	id := newCallID(time.Now())
	if c.proto >= ProtocolAddressed {
		id = id.to(c.index)
	}
	req.Header.Set("Authorization", id.header(c.secret, req.Method, req.URL.RequestURI(), body))
	return id
}

// Ready returns nil if the server serves its data path. The readiness
// probe is open to all and its answer is not signed: do not base anything
// that could lose data on it.
func (c *Client) Ready(ctx context.Context) error {
	return c.call(ctx, "ready", http.MethodGet, "/readyz", nil, nil)
}

func (c *Client) call(ctx context.Context, op, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("control %s: %w", op, err)
		}
		body = b
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("control %s: %w", op, err)
	}
	id := c.authorize(req, body)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("control %s: %w", op, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("control %s: reading the answer: %w", op, err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("control %s: an answer of more than %d bytes", op, maxAnswer)
	}
	if c.trustsOnlySignedAnswers() && !openPaths[path] {
		if err := checkAnswer(c.secret, method, req.URL.RequestURI(), id, resp, data); err != nil {
			return fmt.Errorf("control %s: %w", op, err)
		}
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Op: op, Status: resp.StatusCode}
		if json.Unmarshal(data, &e.Body) != nil || e.Body.Error == "" {
			e.Body.Error = strings.TrimSpace(string(data))
		}
		if resp.StatusCode == http.StatusUnauthorized && c.proto == ProtocolSignedCalls && resp.Header.Get("WWW-Authenticate") != authScheme {
			e.Body.Error += "; the refusal asks for no signed call, as servers of the first release do: only a caller that knows from a source it trusts that the server is one may call it with their fixed token (ProtocolBearer)"
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("control %s: decoding the answer: %w", op, err)
	}
	return nil
}
