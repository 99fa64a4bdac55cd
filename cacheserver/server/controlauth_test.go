package server_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
)

// TestControlRefusesCallersWithoutTheSecret checks that a server with a
// shared secret serves its control API only to callers that prove they
// hold it: anyone who can reach the control port (any pod of the cluster,
// any user of the node) must not drain the instance, mark its dirty data
// for discarding, change its knobs, or copy files up as the server.
func TestControlRefusesCallersWithoutTheSecret(t *testing.T) {
	const secret = "s3cret"
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 1, ExtentSize: 4096, Secret: secret})
	f, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	if _, err := f.Create(ctx, "a", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	base := "http://" + in.Control[0]
	calls := map[string]struct{ method, path, body string }{
		"drain":    {http.MethodPost, "/v1/drain", ""},
		"discard":  {http.MethodPost, "/v1/discard", ""},
		"hidden":   {http.MethodPost, "/v1/hidden/remove", ""},
		"flush":    {http.MethodPost, "/v1/flush", ""},
		"tunables": {http.MethodPut, "/v1/tunables", `{"maxFileSize": 1}`},
		"preload":  {http.MethodPost, "/v1/paths/preload", `{"path": ""}`},
		"evict":    {http.MethodPost, "/v1/paths/evict", `{"path": "a"}`},
		"stats":    {http.MethodGet, "/v1/stats", ""},
	}
	for name, c := range calls {
		for _, auth := range []string{"", "Bearer " + secret, "Bearer 0000"} {
			req, _ := http.NewRequestWithContext(ctx, c.method, base+c.path, strings.NewReader(c.body))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with Authorization %q: HTTP %d, want %d", name, auth, resp.StatusCode, http.StatusUnauthorized)
			}
		}
	}
	if in.Servers[0].Drained() || in.Servers[0].Discarded() {
		t.Errorf("a caller without the secret drained (%t) or discarded (%t) the server", in.Servers[0].Drained(), in.Servers[0].Discarded())
	}
	if _, err := f.WriteAt(ctx, "a", []byte("still writable"), 0); err != nil {
		t.Errorf("write after refused control calls: %v", err)
	}
	other, err := client.New(client.Options{Servers: in.Data, ExtentSize: 4096, Secret: []byte("guess")})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.GetAttr(ctx, "a"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("GetAttr of a client with another secret: %v, want EACCES", err)
	}
	ctl := control.NewClient(in.Control[0], []byte(secret), nil)
	st, err := ctl.Stats(ctx)
	if err != nil || st.DirtyBytes == 0 {
		t.Errorf("Stats with the secret = %+v, %v; want the dirty bytes", st, err)
	}
	// What was refused shows, for an alert to catch a peer without the
	// secret or with its clock off.
	if want := uint64(3 * len(calls)); st.RefusedControlCalls != want || st.RefusedConnections != 1 {
		t.Errorf("Stats count %d refused control calls and %d refused connections, want %d and 1", st.RefusedControlCalls, st.RefusedConnections, want)
	}
	// The server cannot sign its refusal for a caller of another secret,
	// which therefore cannot trust it either.
	if _, err := control.NewClient(in.Control[0], []byte("another"), nil).Stats(ctx); !errors.Is(err, control.ErrUnsignedAnswer) {
		t.Errorf("Stats with another secret: %v, want ErrUnsignedAnswer", err)
	}
	if res, err := ctl.Drain(ctx); err != nil || res.RemainingBytes != 0 || !in.Servers[0].Drained() {
		t.Errorf("Drain with the secret = %+v, %v; want the server drained", res, err)
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + probe)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s without the secret: HTTP %d, want 200: kubelet probes carry no secret", probe, resp.StatusCode)
		}
	}
}
