package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// servedRig is a handler over a file of calls served, as a server process
// has one; restart makes the handler of the next process over that file.
type servedRig struct {
	t    *testing.T
	file string
	svc  *fakeService
	h    *Handler
	srv  *httptest.Server
}

const servedSecret = "s3cret"

func newServedRig(t *testing.T) *servedRig {
	r := &servedRig{t: t, file: filepath.Join(t.TempDir(), "served-calls.log"), svc: &fakeService{ready: true}}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *servedRig) start() {
	r.t.Helper()
	h, err := NewHandlerOf(r.svc, HandlerConfig{Secret: []byte(servedSecret), ServedCalls: r.file})
	if err != nil {
		r.t.Fatal(err)
	}
	r.h, r.srv = h, httptest.NewServer(h)
}

func (r *servedRig) stop() {
	r.srv.Close()
	if err := r.h.Close(); err != nil {
		r.t.Error(err)
	}
}

func (r *servedRig) restart() {
	r.t.Helper()
	r.stop()
	r.start()
}

// send sends a call with the Authorization header auth, and returns the
// answer's status.
func (r *servedRig) send(method, uri, auth string) int {
	r.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, r.srv.URL+uri, strings.NewReader(""))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServedCallsAreRefusedAfterARestart sends calls that change something,
// restarts the server, and sends them again: the server's new process must
// refuse them, and serve fresh ones. Before the server kept a file of the
// calls it served, its new process served again a call signed within five
// seconds before it started, or by a caller whose clock ran ahead of the
// server's, a discard included.
func TestServedCallsAreRefusedAfterARestart(t *testing.T) {
	r := newServedRig(t)
	secret := []byte(servedSecret)
	seen := map[string]struct{ method, uri, auth string }{
		"a discard":                  {http.MethodPost, "/v1/discard", sign(secret, http.MethodPost, "/v1/discard", nil, time.Now())},
		"a drain from a clock ahead": {http.MethodPost, "/v1/drain", sign(secret, http.MethodPost, "/v1/drain", nil, time.Now().Add(3*time.Minute))},
	}
	for name, c := range seen {
		if code := r.send(c.method, c.uri, c.auth); code != http.StatusOK {
			t.Fatalf("%s: HTTP %d, want 200", name, code)
		}
	}
	for _, how := range []string{"restart", "second restart"} {
		r.restart()
		r.svc.calls = nil
		for name, c := range seen {
			if code := r.send(c.method, c.uri, c.auth); code != http.StatusUnauthorized {
				t.Errorf("%s sent again after a %s: HTTP %d, want 401", name, how, code)
			}
		}
		if code := r.send(http.MethodPost, "/v1/discard", sign(secret, http.MethodPost, "/v1/discard", nil, time.Now())); code != http.StatusOK {
			t.Errorf("a fresh discard after a %s: HTTP %d, want 200", how, code)
		}
		if diff := cmp.Diff([]string{"discard"}, r.svc.calls); diff != "" {
			t.Errorf("calls served after a %s (-want +got):\n%s", how, diff)
		}
	}
}

// TestServedLogKeepsCallsWorthRemembering checks what the file of calls
// served holds: the calls that change something, not the stats that the
// operator asks for every few seconds (an fsync each), and not calls too
// old for any server to serve, which a restart drops. A torn last line, of
// a call never served, is passed over.
func TestServedLogKeepsCallsWorthRemembering(t *testing.T) {
	r := newServedRig(t)
	secret := []byte(servedSecret)
	stats := newCallID(time.Now())
	flush := newCallID(time.Now())
	if code := r.send(http.MethodGet, "/v1/stats", stats.header(secret, http.MethodGet, "/v1/stats", nil)); code != http.StatusOK {
		t.Fatalf("stats: HTTP %d", code)
	}
	if code := r.send(http.MethodPost, "/v1/flush", flush.header(secret, http.MethodPost, "/v1/flush", nil)); code != http.StatusOK {
		t.Fatalf("flush: HTTP %d", code)
	}
	r.stop()
	old := newCallID(time.Now().Add(-maxSkew - time.Minute))
	f, err := os.OpenFile(r.file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("1 0123\n" + formatServed(old) + "17000")
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	r.start()
	b, err := os.ReadFile(r.file)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(formatServed(flush), string(b)); diff != "" {
		t.Errorf("the log after a restart (-want +got):\n%s", diff)
	}
}

// formatServed returns the line of the log that records id.
func formatServed(id callID) string { return fmt.Sprintf("%d %s\n", id.ts, id.nonce) }

// TestUnrecordedCallsAreNotServed breaks the file of calls served: a call
// that changes something must not be served, since the server's next
// process could not refuse it, and the caller learns why (EIO); stats,
// which are not recorded, are still served.
func TestUnrecordedCallsAreNotServed(t *testing.T) {
	r := newServedRig(t)
	if err := r.h.Close(); err != nil {
		t.Fatal(err)
	}
	cl := NewClient(r.srv.URL, []byte(servedSecret), nil)
	if err := cl.Discard(context.Background()); !errors.Is(err, syscall.EIO) {
		t.Errorf("a discard that cannot be recorded: %v, want EIO", err)
	}
	if _, err := cl.Stats(context.Background()); err != nil {
		t.Errorf("stats: %v", err)
	}
	if diff := cmp.Diff([]string{"stats"}, r.svc.calls); diff != "" {
		t.Errorf("calls served (-want +got):\n%s", diff)
	}
}

// BenchmarkRecordedCalls measures what recording a call costs: signed
// flushes served by a handler that keeps the calls in memory, then by one
// that records them in a file on the disk of the test's temporary
// directory, and reports the ratio of their times per call.
func BenchmarkRecordedCalls(b *testing.B) {
	secret := []byte(servedSecret)
	quiet := slog.New(slog.DiscardHandler)
	memory, _ := NewHandlerOf(&fakeService{}, HandlerConfig{Secret: secret, Log: quiet})
	file, err := NewHandlerOf(&fakeService{}, HandlerConfig{Secret: secret, ServedCalls: filepath.Join(b.TempDir(), "served-calls.log"), Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	serve := func(h *Handler) time.Duration {
		start := time.Now()
		for range b.N {
			req := httptest.NewRequest(http.MethodPost, "/v1/flush", nil)
			req.Header.Set("Authorization", sign(secret, http.MethodPost, "/v1/flush", nil, time.Now()))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("HTTP %d", w.Code)
			}
		}
		return time.Since(start)
	}
	inMemory, recorded := serve(memory), serve(file)
	b.ReportMetric(float64(inMemory.Nanoseconds())/float64(b.N), "memory-ns/call")
	b.ReportMetric(float64(recorded.Nanoseconds())/float64(b.N), "recorded-ns/call")
	b.ReportMetric(float64(recorded)/float64(inMemory), "recorded/memory")
}
