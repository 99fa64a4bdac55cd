package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorded is an answer as it crossed the network.
type recorded struct {
	status int
	header http.Header
	body   []byte
}

func (a recorded) replay(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// forward serves r with h and returns the answer h gave.
func forward(h http.Handler, r *http.Request) recorded {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return recorded{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// TestAnswersMustBeSigned checks that a client takes no answer that the
// server did not sign for the call it made: whoever answers at a server's
// address (a pod that got the address of a dead server, anyone on the path)
// must not make a drain look done, or a server look clean, while its dirty
// data waits elsewhere.
func TestAnswersMustBeSigned(t *testing.T) {
	const secret = "s3cret"
	done := func() recorded {
		return recorded{status: http.StatusOK, header: http.Header{}, body: []byte(`{"remainingBytes":0}` + "\n")}
	}
	tests := map[string]struct {
		// answer answers the second drain, given the server's own
		// answer to the first, which left nothing dirty.
		answer func(real http.Handler, first recorded, r *http.Request) recorded
	}{
		"unsigned": {answer: func(http.Handler, recorded, *http.Request) recorded { return done() }},
		"signed with another secret": {answer: func(_ http.Handler, _ recorded, r *http.Request) recorded {
			a := done()
			a.header.Set(answerHeader, "mac="+mac([]byte("guess"), answerText(r.Method, r.URL.RequestURI(), callID{}, a.status, a.body)))
			return a
		}},
		"a signature that is not one": {answer: func(_ http.Handler, _ recorded, r *http.Request) recorded {
			a := done()
			a.header.Set(answerHeader, "mac="+strings.Repeat("0", 64))
			return a
		}},
		"the answer to an earlier drain": {answer: func(_ http.Handler, first recorded, _ *http.Request) recorded { return first }},
		"the server's failure made a success": {answer: func(real http.Handler, _ recorded, r *http.Request) recorded {
			a := forward(real, r)
			a.status, a.body = http.StatusOK, []byte(`{"remainingBytes":0}`+"\n")
			return a
		}},
		"the server's failure with its count changed": {answer: func(real http.Handler, _ recorded, r *http.Request) recorded {
			a := forward(real, r)
			a.body = bytes.Replace(a.body, []byte(`"remainingBytes":4096`), []byte(`"remainingBytes":0`), 1)
			return a
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			svc := &fakeService{}
			real := NewHandler(svc, []byte(secret), nil)
			var mu sync.Mutex
			var first *recorded
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if first == nil {
					a := forward(real, r)
					first = &a
					a.replay(w)
					return
				}
				tc.answer(real, *first, r).replay(w)
			}))
			defer srv.Close()
			cl := NewClient(srv.URL, []byte(secret), nil)
			ctx := context.Background()
			if _, err := cl.Drain(ctx); err != nil {
				t.Fatalf("the first drain, answered by the server: %v", err)
			}
			svc.remaining, svc.err = 4096, fmt.Errorf("write back a: %w", syscall.ENOSPC)
			res, err := cl.Drain(ctx)
			if !errors.Is(err, ErrUnsignedAnswer) {
				t.Fatalf("Drain = %+v, %v; want ErrUnsignedAnswer", res, err)
			}
			if errors.Is(err, ErrFlushIncomplete) || errors.Is(err, syscall.ENOSPC) {
				t.Errorf("Drain: %v, which takes something of the answer", err)
			}
		})
	}
}

// TestUnsignedAnswersAreNothing checks every call of a client against a
// server that answers everything with success and no signature: none of
// them succeeds.
func TestUnsignedAnswersAreNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, struct{}{})
	}))
	defer srv.Close()
	c := NewClient(srv.URL, []byte("s3cret"), nil)
	ctx := context.Background()
	calls := map[string]func() error{
		"flush":         func() error { _, err := c.Flush(ctx); return err },
		"drain":         func() error { _, err := c.Drain(ctx); return err },
		"discard":       func() error { return c.Discard(ctx) },
		"remove hidden": func() error { _, err := c.RemoveHidden(ctx); return err },
		"flush path":    func() error { return c.FlushPath(ctx, "a") },
		"evict path":    func() error { return c.EvictPath(ctx, "a") },
		"invalidate":    func() error { return c.InvalidatePath(ctx, "a") },
		"preload":       func() error { _, err := c.Preload(ctx, "a"); return err },
		"stats":         func() error { _, err := c.Stats(ctx); return err },
		"set tunables":  func() error { return c.SetTunables(ctx, Tunables{}) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrUnsignedAnswer) {
			t.Errorf("%s: %v, want ErrUnsignedAnswer", name, err)
		}
	}
	// The probes are open to all and sign nothing; the client takes their
	// answers as they are.
	if err := c.Ready(ctx); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// TestRefusalsAskingForNoSignatureDowngradeNothing checks that a client
// never falls back to the first release's fixed token because an answer
// asks for no signature: anyone can send such an answer, and the token,
// once sent, lets whoever sees it control the servers of the first release
// of the instance.
func TestRefusalsAskingForNoSignatureDowngradeNothing(t *testing.T) {
	for _, p := range []Protocol{ProtocolAddressed, ProtocolSigned, ProtocolSignedCalls} {
		t.Run(p.String(), func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, strings.Fields(r.Header.Get("Authorization") + " none")[0])
				mu.Unlock()
				writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: "the control API needs the instance's shared secret", Errno: int(syscall.EACCES)})
			}))
			defer srv.Close()
			c := NewClientFor(Server{Addr: srv.URL, Protocol: p}, []byte("s3cret"), nil)
			for range 2 {
				if _, err := c.Drain(context.Background()); err == nil {
					t.Fatalf("Drain succeeded on a refusal")
				}
			}
			if diff := cmp.Diff([]string{authScheme, authScheme}, got); diff != "" {
				t.Errorf("Authorization schemes sent (-want +got):\n%s", diff)
			}
		})
	}
}

// TestServersSignTheirAnswers checks the server's side: answers to signed
// calls carry the signature of that call, failures and the refusal of a
// call signed right but too old included, so that the caller trusts the
// reason; the probes stay open.
func TestServersSignTheirAnswers(t *testing.T) {
	const secret = "s3cret"
	svc := &fakeService{ready: true}
	srv := httptest.NewServer(NewHandler(svc, []byte(secret), nil))
	defer srv.Close()
	send := func(method, uri, body string, id callID) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+uri, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if id != (callID{}) {
			req.Header.Set("Authorization", id.header([]byte(secret), method, uri, []byte(body)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, data
	}
	tests := map[string]struct {
		method, uri, body string
		at                time.Duration
		wantStatus        int
	}{
		"a success":           {method: http.MethodGet, uri: "/v1/stats", wantStatus: http.StatusOK},
		"a failure":           {method: http.MethodPost, uri: "/v1/paths/evict", body: "{", wantStatus: http.StatusBadRequest},
		"a refusal of a time": {method: http.MethodPost, uri: "/v1/discard", at: -10 * time.Minute, wantStatus: http.StatusUnauthorized},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			id := newCallID(time.Now().Add(tc.at))
			resp, data := send(tc.method, tc.uri, tc.body, id)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("HTTP %d, want %d: %s", resp.StatusCode, tc.wantStatus, data)
			}
			if err := checkAnswer([]byte(secret), tc.method, tc.uri, id, resp, data); err != nil {
				t.Errorf("the server's answer: %v", err)
			}
			if err := checkAnswer([]byte(secret), tc.method, tc.uri, newCallID(time.Now()), resp, data); err == nil {
				t.Errorf("the server's answer passes for that of another call")
			}
		})
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if resp, data := send(http.MethodGet, probe, "", callID{}); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a signature: HTTP %d, %s", probe, resp.StatusCode, data)
		}
	}
	if err := NewClient(srv.URL, []byte(secret), nil).Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
	if diff := cmp.Diff([]string{"stats"}, svc.calls); diff != "" {
		t.Errorf("calls served (-want +got):\n%s", diff)
	}
}
