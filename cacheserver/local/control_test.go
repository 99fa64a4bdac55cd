package local

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// A state written by a binary from before servers signed their answers
// still reaches its servers, and one written since takes no unsigned answer.
func TestControlClientSpeaksTheProtocolOfTheState(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"dirtyBytes": 7}`))
	}))
	defer srv.Close()
	st := &State{CacheDir: t.TempDir()}
	if err := os.WriteFile(secretPath(st.CacheDir), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.URL, "http://")

	c, err := st.controlClient(ServerState{Control: addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := c.Stats(context.Background())
	if err != nil || stats.DirtyBytes != 7 {
		t.Fatalf("server of an earlier state: stats %+v, err %v; want 7 dirty bytes", stats, err)
	}

	c, err = st.controlClient(ServerState{Control: addr, ControlProtocol: control.CurrentProtocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stats(context.Background()); !errors.Is(err, control.ErrUnsignedAnswer) {
		t.Fatalf("server of this release answering unsigned: err %v, want ErrUnsignedAnswer", err)
	}
}
