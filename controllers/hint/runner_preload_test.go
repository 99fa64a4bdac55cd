package hint

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// preloadServer is a control service whose preloads answer with bytes per
// path, after hold is closed, or fail with err.
type preloadServer struct {
	control.Service
	bytes map[string]int64
	hold  chan struct{}
	err   error

	mu    sync.Mutex
	paths []string
}

func (s *preloadServer) Preload(ctx context.Context, p string) (int64, error) {
	s.mu.Lock()
	s.paths = append(s.paths, p)
	s.mu.Unlock()
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.bytes[p], s.err
}

func (s *preloadServer) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.paths...)
}

func target(t *testing.T, name string, svc *preloadServer) Target {
	srv := httptest.NewServer(control.NewHandler(svc, nil, nil))
	t.Cleanup(srv.Close)
	return Target{Name: name, Client: control.NewClient(srv.URL, nil, nil)}
}

func preloads(paths ...string) []cachev1alpha1.RequestSpec {
	var reqs []cachev1alpha1.RequestSpec
	for _, p := range paths {
		reqs = append(reqs, cachev1alpha1.RequestSpec{ID: "p", Operation: cachev1alpha1.RequestPreload, Path: p})
	}
	return reqs
}

// poll polls key until it is in state want, and returns the outcome.
func poll(t *testing.T, r *Runner, key string, want State, bytes int64) Outcome {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, out := r.Poll(key)
		if state == want && out.Bytes == bytes {
			return out
		}
		if state == Done || time.Now().After(deadline) {
			t.Fatalf("Poll = %v, %+v; want %v with %d bytes", state, out, want, bytes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStartAllCountsPreloadedBytes runs two preload paths on two servers,
// one of which holds its answers back: while it does, the runner reports
// the bytes of the calls that ended; at the end, all of them.
func TestStartAllCountsPreloadedBytes(t *testing.T) {
	bytes := map[string]int64{"a": 10, "b": 5}
	fast := &preloadServer{bytes: bytes}
	slow := &preloadServer{bytes: map[string]int64{"a": 20, "b": 7}, hold: make(chan struct{})}
	r := NewRunner(context.Background(), 10*time.Second)
	r.StartAll("k", preloads("a", "b"), []Target{target(t, "server-0", fast), target(t, "server-1", slow)})

	poll(t, r, "k", Running, 15)
	close(slow.hold)
	out := poll(t, r, "k", Done, 42)
	if out.Err != nil {
		t.Errorf("outcome error: %v", out.Err)
	}
	for name, svc := range map[string]*preloadServer{"fast": fast, "slow": slow} {
		if diff := cmp.Diff([]string{"a", "b"}, svc.called()); diff != "" {
			t.Errorf("%s server's preloads (-want +got):\n%s", name, diff)
		}
	}
	if state, _ := r.Poll("k"); state != Absent {
		t.Errorf("Poll after the outcome was taken = %v, want Absent", state)
	}
}

// TestStartAllStopsATargetAtItsFirstFailure checks that a server whose
// preload of one path failed is not asked for the next, and that the
// failure names it.
func TestStartAllStopsATargetAtItsFirstFailure(t *testing.T) {
	failing := &preloadServer{err: syscall.ENOENT}
	ok := &preloadServer{bytes: map[string]int64{"a": 1, "b": 2}}
	r := NewRunner(context.Background(), 10*time.Second)
	r.StartAll("k", preloads("a", "b"), []Target{target(t, "server-0", failing), target(t, "server-1", ok)})

	out := poll(t, r, "k", Done, 3)
	if !errors.Is(out.Err, syscall.ENOENT) || !Final(cachev1alpha1.RequestPreload, out.Err) || !strings.Contains(out.Err.Error(), `server-0: preload "a": `) {
		t.Errorf("outcome error = %v, want a final ENOENT of server-0 and path a", out.Err)
	}
	if diff := cmp.Diff([]string{"a"}, failing.called()); diff != "" {
		t.Errorf("failing server's preloads (-want +got):\n%s", diff)
	}
}

// TestCancelEndsTheCallsOfARequest cancels a preload whose server holds
// its answer back: the server's call ends, by its context, and the
// request is Done with the error, so that a request with other paths can
// start at once rather than after the old one ran to its end. A Cancel of
// a key that runs nothing does nothing.
func TestCancelEndsTheCallsOfARequest(t *testing.T) {
	slow := &preloadServer{bytes: map[string]int64{"a": 20}, hold: make(chan struct{})}
	defer close(slow.hold)
	r := NewRunner(context.Background(), time.Hour)
	r.Cancel("k")
	r.StartAll("k", preloads("a", "b"), []Target{target(t, "server-0", slow)})
	if state, out := r.Poll("k"); state != Running || !cmp.Equal(out.Requests, preloads("a", "b")) {
		t.Fatalf("Poll = %v, %+v; want Running the requests started", state, out)
	}
	for len(slow.called()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	r.Cancel("k")
	out := poll(t, r, "k", Done, 0)
	if out.Err == nil || !strings.Contains(out.Err.Error(), `server-0: preload "a"`) {
		t.Errorf("outcome error = %v, want the cancelled call of server-0", out.Err)
	}
	if diff := cmp.Diff([]string{"a"}, slow.called()); diff != "" {
		t.Errorf("server's preloads (-want +got):\n%s", diff)
	}
}

// TestDropForgetsARequest drops a running preload: its call ends, and the
// key is Absent at once, free for another request.
func TestDropForgetsARequest(t *testing.T) {
	slow := &preloadServer{hold: make(chan struct{})}
	defer close(slow.hold)
	r := NewRunner(context.Background(), time.Hour)
	r.StartAll("k", preloads("a"), []Target{target(t, "server-0", slow)})
	for len(slow.called()) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	r.Drop("k")
	if state, _ := r.Poll("k"); state != Absent {
		t.Fatalf("Poll after Drop = %v, want Absent", state)
	}
	fast := &preloadServer{bytes: map[string]int64{"b": 3}}
	r.StartAll("k", preloads("b"), []Target{target(t, "server-0", fast)})
	if out := poll(t, r, "k", Done, 3); out.Err != nil {
		t.Errorf("the request started after the drop: %v", out.Err)
	}
}
