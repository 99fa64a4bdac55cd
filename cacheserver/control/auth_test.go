package control

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSignedCallsCannotBeReused checks that what crosses the network in a
// control call does not let anyone who saw it make calls: the call cannot
// be sent again (to the same server, or to it after a restart, which
// forgets the calls it served), sent late, or changed into another. Before calls were
// signed one by one, a token seen once allowed any call, a discard of
// the instance's dirty data included.
func TestSignedCallsCannotBeReused(t *testing.T) {
	const secret = "s3cret"
	svc := &fakeService{ready: true}
	srv := httptest.NewServer(NewHandler(svc, []byte(secret), nil))
	defer srv.Close()
	send := func(method, uri, body, auth string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+uri, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	evict := `{"path":"a"}`
	seen := sign([]byte(secret), http.MethodPost, "/v1/paths/evict", []byte(evict), time.Now())
	if code := send(http.MethodPost, "/v1/paths/evict", evict, seen); code != http.StatusOK {
		t.Fatalf("a signed call: HTTP %d, want 200", code)
	}
	refused := map[string]struct{ method, uri, body, auth string }{
		"sent again":                       {http.MethodPost, "/v1/paths/evict", evict, seen},
		"made a discard":                   {http.MethodPost, "/v1/discard", "", seen},
		"made a drain":                     {http.MethodPost, "/v1/drain", "", seen},
		"with another body":                {http.MethodPost, "/v1/paths/evict", `{"path":"b"}`, sign([]byte(secret), http.MethodPost, "/v1/paths/evict", []byte(evict), time.Now())},
		"signed before the server started": {http.MethodPost, "/v1/discard", "", sign([]byte(secret), http.MethodPost, "/v1/discard", nil, time.Now().Add(-time.Minute))},
		"sent ten minutes on":              {http.MethodPost, "/v1/discard", "", sign([]byte(secret), http.MethodPost, "/v1/discard", nil, time.Now().Add(-10*time.Minute))},
		"another secret":                   {http.MethodPost, "/v1/discard", "", sign([]byte("guess"), http.MethodPost, "/v1/discard", nil, time.Now())},
		"a bearer token":                   {http.MethodPost, "/v1/discard", "", "Bearer " + secret},
		"no signature":                     {http.MethodPost, "/v1/discard", "", ""},
	}
	for name, c := range refused {
		if code := send(c.method, c.uri, c.body, c.auth); code != http.StatusUnauthorized {
			t.Errorf("a call %s: HTTP %d, want 401", name, code)
		}
	}
	if got := svc.calls; len(got) != 1 || got[0] != "evict a" {
		t.Errorf("calls served: %q, want the first evict only", got)
	}
	cl := NewClient(srv.URL, []byte(secret), nil)
	for range 3 {
		if _, err := cl.Stats(context.Background()); err != nil {
			t.Fatalf("Stats of a client with the secret: %v", err)
		}
	}
	if err := cl.Discard(context.Background()); err != nil {
		t.Fatalf("Discard of a client with the secret: %v", err)
	}
	// The refusal cannot be signed for a caller of another secret, so the
	// caller cannot trust it either.
	if _, err := NewClient(srv.URL, []byte("guess"), nil).Stats(context.Background()); !errors.Is(err, ErrUnsignedAnswer) {
		t.Errorf("Stats with another secret: %v, want ErrUnsignedAnswer", err)
	}
}

// TestClientsTalkToServersOfEarlierReleases checks that a client made for
// the protocol of an earlier release controls its servers: after a manager
// upgrade, the instances whose servers still run must still be flushed and
// torn down.
func TestClientsTalkToServersOfEarlierReleases(t *testing.T) {
	const secret = "s3cret"
	// The header first-release servers take for this secret, as they
	// computed it.
	const token = "Bearer b9542bfa5880bc93c6a84df9ce189b27e23c26fe681e85f804e3898169f431c3"
	svc := &fakeService{ready: true}
	inner := NewHandler(svc, nil, nil)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: "the control API needs the instance's shared secret", Errno: int(syscall.EACCES)})
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer first.Close()
	// A server of the release after signs nothing it answers.
	signed := NewHandler(svc, []byte(secret), nil)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		signed.ServeHTTP(stripSignature{w}, r)
	}))
	defer second.Close()

	ctx := context.Background()
	for name, cl := range map[string]*Client{
		"first release":    NewClientFor(Server{Addr: first.URL, Protocol: ProtocolBearer}, []byte(secret), nil),
		"release after it": NewClientFor(Server{Addr: second.URL, Protocol: ProtocolSignedCalls}, []byte(secret), nil),
	} {
		svc.calls = nil
		for range 2 {
			if _, err := cl.Stats(ctx); err != nil {
				t.Fatalf("Stats of a server of the %s: %v", name, err)
			}
		}
		if _, err := cl.Drain(ctx); err != nil {
			t.Fatalf("Drain of a server of the %s: %v", name, err)
		}
		if diff := cmp.Diff([]string{"stats", "stats", "drain"}, svc.calls); diff != "" {
			t.Errorf("calls served by the server of the %s (-want +got):\n%s", name, diff)
		}
	}
	if _, err := NewClientFor(Server{Addr: first.URL, Protocol: ProtocolBearer}, []byte("guess"), nil).Stats(ctx); !errors.Is(err, syscall.EACCES) {
		t.Errorf("Stats of a first-release server with another secret: %v, want EACCES", err)
	}
}

// stripSignature passes an answer on without its signature, as servers of
// releases that signed no answers sent it.
type stripSignature struct{ http.ResponseWriter }

func (w stripSignature) WriteHeader(status int) {
	w.Header().Del(answerHeader)
	w.ResponseWriter.WriteHeader(status)
}
