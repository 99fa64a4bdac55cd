package control

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCallsAreServedOnlyByTheirServer checks which server serves a call:
// every server of an instance holds the same secret, so a call must name
// the server it is meant for, and another must refuse it. Calls used to
// name no server, and a drain or discard seen on its way to one server of
// an instance could be sent to each of the others. A caller of this
// release must not be made to speak the protocol of a server of the
// release before by the refusal of such a server; a caller of that
// release still controls a server that was not told to refuse its calls.
func TestCallsAreServedOnlyByTheirServer(t *testing.T) {
	const secret = "s3cret"
	tests := map[string]struct {
		handler   HandlerConfig
		before    bool // a server of the release before, which reads no server in a call
		client    Server
		wantErr   error
		wantCalls []string
	}{
		"a call for server 1, to it": {handler: HandlerConfig{Index: 1, RefuseUnaddressed: true},
			client: Server{Index: 1, Protocol: ProtocolAddressed}, wantCalls: []string{"drain"}},
		"a call for server 0, to server 1": {handler: HandlerConfig{Index: 1},
			client: Server{Index: 0, Protocol: ProtocolAddressed}, wantErr: ErrUnsignedAnswer},
		"a call for server 1, to server 0": {handler: HandlerConfig{Index: 0},
			client: Server{Index: 1, Protocol: ProtocolAddressed}, wantErr: ErrUnsignedAnswer},
		"a call that names no server, to a server that serves them": {handler: HandlerConfig{Index: 1},
			client: Server{Index: 1, Protocol: ProtocolSigned}, wantCalls: []string{"drain"}},
		"a call that names no server, to a server that refuses them": {handler: HandlerConfig{Index: 1, RefuseUnaddressed: true},
			client: Server{Index: 1, Protocol: ProtocolSigned}, wantErr: syscall.EACCES},
		"a call for server 0, to a server of the release before": {handler: HandlerConfig{Index: 0}, before: true,
			client: Server{Index: 0, Protocol: ProtocolAddressed}, wantErr: ErrUnsignedAnswer},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			svc := &fakeService{ready: true}
			tc.handler.Secret = []byte(secret)
			h, err := NewHandlerOf(svc, tc.handler)
			if err != nil {
				t.Fatal(err)
			}
			var served http.Handler = h
			if tc.before {
				served = withoutServer(h)
			}
			srv := httptest.NewServer(served)
			defer srv.Close()
			tc.client.Addr = srv.URL
			_, err = NewClientFor(tc.client, []byte(secret), nil).Drain(context.Background())
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Drain: %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, svc.calls); diff != "" {
				t.Errorf("calls served (-want +got):\n%s", diff)
			}
		})
	}
}

// serverParam is the server a call names in its Authorization header.
var serverParam = regexp.MustCompile(` server=\d+,`)

// withoutServer passes calls to h without the server they name, as
// servers of the release before read them: they check the signature of a
// call that names none.
func withoutServer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", serverParam.ReplaceAllString(r.Header.Get("Authorization"), ""))
		h.ServeHTTP(w, r)
	})
}

// TestAnswersAreOfTheServerCalled checks that the signature of an answer
// names the server that answered: the answer of one server of an instance
// must not pass for that of another to the same call, nor for the answer
// to a call that names no server.
func TestAnswersAreOfTheServerCalled(t *testing.T) {
	const secret = "s3cret"
	h, err := NewHandlerOf(&fakeService{ready: true}, HandlerConfig{Secret: []byte(secret), Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	id := newCallID(time.Now())
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/v1/stats", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", id.to(1).header([]byte(secret), http.MethodGet, "/v1/stats", nil))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stats: HTTP %d, %v: %s", resp.StatusCode, err, data)
	}
	for name, tc := range map[string]struct {
		id      callID
		wantErr error
	}{
		"of server 1, called":    {id: id.to(1)},
		"of server 0":            {id: id.to(0), wantErr: ErrUnsignedAnswer},
		"to a call of no server": {id: id, wantErr: ErrUnsignedAnswer},
	} {
		if err := checkAnswer([]byte(secret), http.MethodGet, "/v1/stats", tc.id, resp, data); !errors.Is(err, tc.wantErr) {
			t.Errorf("the answer of server 1 taken as that %s: %v, want %v", name, err, tc.wantErr)
		}
	}
}
