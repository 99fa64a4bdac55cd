package local

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestFlushAllReportsProgress flushes a server that takes several progress
// intervals: local down says how many dirty bytes are left while it
// waits, and nothing once the flush returned.
func TestFlushAllReportsProgress(t *testing.T) {
	defer func(d time.Duration) { flushProgressEvery = d }(flushProgressEvery)
	flushProgressEvery = 50 * time.Millisecond
	var dirty atomic.Int64
	dirty.Store(3 << 20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/flush":
			for dirty.Load() > 0 {
				time.Sleep(10 * time.Millisecond)
				dirty.Add(-64 << 10)
			}
			_, _ = w.Write([]byte(`{"remainingBytes": 0}`))
		default:
			_, _ = fmt.Fprintf(w, `{"dirtyBytes": %d}`, dirty.Load())
		}
	}))
	defer srv.Close()
	st := &State{CacheDir: t.TempDir(), Servers: []ServerState{{Control: strings.TrimPrefix(srv.URL, "http://")}}}
	if err := os.WriteFile(secretPath(st.CacheDir), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lockedWriter
	if err := flushAll(context.Background(), st, &out); err != nil {
		t.Fatal(err)
	}
	after := out.String()
	if n := strings.Count(after, "burstcache: writing back: "); n < 2 || !strings.Contains(after, "MiB dirty left") {
		t.Errorf("a flush of about 500ms reported its progress %d times, want at least 2 with the bytes left:\n%s", n, after)
	}
	time.Sleep(3 * flushProgressEvery)
	if got := out.String(); got != after {
		t.Errorf("progress reported after the flush returned:\n%s", got[len(after):])
	}
}

// lockedWriter is a strings.Builder that goroutines may write to.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDownSaysWhichFilesWereGivenTheirNamesBack has a server answer the
// removal of hidden names with two files hidden for renames that failed:
// one given its name back, one kept beside it. Down's output names both,
// under the backing directory, so that the user finds them.
func TestDownSaysWhichFilesWereGivenTheirNamesBack(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/v1/hidden/remove" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"removed": 3, "givenBack": [{"path": "d/f", "as": "d/f"}, {"path": "g", "as": "g.burstcache-kept-7"}]}`))
	}))
	defer srv.Close()
	st := &State{CacheDir: t.TempDir(), Backing: "/lus/scratch", Servers: []ServerState{{Control: strings.TrimPrefix(srv.URL, "http://")}}}
	if err := os.WriteFile(secretPath(st.CacheDir), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out lockedWriter
	if err := removeHiddenAll(context.Background(), st, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/lus/scratch/d/f was given its name back", "/lus/scratch/g is kept as /lus/scratch/g.burstcache-kept-7"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("down said:\n%s\nwant a line with %q", out.String(), want)
		}
	}
}
