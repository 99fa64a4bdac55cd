package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Client calls the control API of one server.
type Client struct {
	base string
	http *http.Client
	// secret signs every call; nil for a server that has none.
	secret []byte
	// legacy is set once the server turned out to be of the first
	// release, which takes only legacyAuth.
	legacy atomic.Bool
}

// NewClient returns a client of the control API at addr ("host:port" or a
// URL) that proves it holds secret, the instance's shared secret (nil for
// a server that has none). A nil hc means http.DefaultClient; give one with
// a timeout for calls other than Flush and Drain, which block until the
// flush ends.
func NewClient(addr string, secret []byte, hc *http.Client) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(addr, "/"), http: hc, secret: secret}
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
		res.Removed = e.Body.Removed
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
	return c.call(ctx, "flush path", http.MethodPost, "/v1/paths/flush", PathRequest{path}, nil)
}

// EvictPath drops the clean cached data of path.
func (c *Client) EvictPath(ctx context.Context, path string) error {
	return c.call(ctx, "evict path", http.MethodPost, "/v1/paths/evict", PathRequest{path}, nil)
}

// InvalidatePath forgets the clean cached data of path, so that changes made
// to the backing store behind the cache's back are seen.
func (c *Client) InvalidatePath(ctx context.Context, path string) error {
	return c.call(ctx, "invalidate path", http.MethodPost, "/v1/paths/invalidate", PathRequest{path}, nil)
}

// Preload copies the extents of path that this server holds up from the
// backing store. It blocks until they are all in the cache or ctx ends;
// Stats shows the progress meanwhile.
func (c *Client) Preload(ctx context.Context, path string) (PreloadResult, error) {
	var res PreloadResult
	err := c.call(ctx, "preload", http.MethodPost, "/v1/paths/preload", PathRequest{path}, &res)
	return res, err
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

// send makes one call, signed as the server takes it.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	switch {
	case len(c.secret) == 0:
	case c.legacy.Load():
		req.Header.Set("Authorization", legacyAuth(c.secret))
	default:
		req.Header.Set("Authorization", sign(c.secret, method, req.URL.RequestURI(), body, time.Now()))
	}
	return c.http.Do(req)
}

// Ready returns nil if the server serves its data path.
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
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("control %s: %w", op, err)
	}
	// A refusal that does not ask for a signature comes from a server of
	// the first release; one that does, from a server upgraded since.
	if resp.StatusCode == http.StatusUnauthorized && len(c.secret) > 0 {
		if legacy := resp.Header.Get("WWW-Authenticate") != authScheme; legacy != c.legacy.Load() {
			_ = resp.Body.Close()
			c.legacy.Store(legacy)
			if resp, err = c.send(ctx, method, path, body); err != nil {
				return fmt.Errorf("control %s: %w", op, err)
			}
		}
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("control %s: reading the answer: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Op: op, Status: resp.StatusCode}
		if json.Unmarshal(data, &e.Body) != nil || e.Body.Error == "" {
			e.Body.Error = strings.TrimSpace(string(data))
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
