package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// TestCapturedControlCallsAreRefusedAfterARestart captures a signed
// control call to a server process on its way, stops the server (killed,
// or stopped by a signal), starts it again over the same cache directory,
// and sends the call again: the new process must refuse it, and serve a
// fresh call. The server used to remember the calls it served only in
// memory, and served again a call signed in the five seconds before it
// started: a discard seen on the network before a restart, sent again
// after it, would have dropped the dirty data the restart had recovered.
func TestCapturedControlCallsAreRefusedAfterARestart(t *testing.T) {
	for name, sig := range map[string]syscall.Signal{"killed": syscall.SIGKILL, "stopped": syscall.SIGTERM} {
		t.Run(name, func(t *testing.T) {
			srv := newHandServer(t)
			srv.start(t)
			rec := &recorder{}
			hc := &http.Client{Transport: rec, Timeout: 30 * time.Second}
			if err := control.NewClient(srv.control, srv.secret, hc).Discard(context.Background()); err != nil {
				t.Fatalf("discard: %v", err)
			}
			seen := rec.last()
			srv.stop(t, sig)
			srv.start(t)
			status, body := seen.sendTo(t, srv.control)
			if since := time.Since(seen.at); since > 4*time.Second {
				t.Fatalf("the restart took %v: the call must be sent again within 5 s of the first time to test what the server remembers", since)
			}
			if status != http.StatusUnauthorized {
				t.Errorf("the discard sent again after the server was %s: HTTP %d, want 401\n%s", name, status, body)
			}
			if _, err := control.NewClient(srv.control, srv.secret, hc).Flush(context.Background()); err != nil {
				t.Errorf("a fresh flush after the server was %s: %v", name, err)
			}
		})
	}
}

// handServer is a cache server process started by hand, over a cache
// directory that outlives it.
type handServer struct {
	args     []string
	ready    string
	logFile  string
	secret   []byte
	cacheDir string
	backing  string

	cmd     *exec.Cmd
	exited  chan error
	control string
	data    string
}

func newHandServer(t *testing.T) *handServer {
	t.Helper()
	return newHandServers(t, [][]string{nil})[0]
}

// newHandServers returns the servers of an instance, one for each element
// of extra, with the flags in it: they share a secret and a backing
// directory, and each has a cache directory of its own.
func newHandServers(t *testing.T, extra [][]string) []*handServer {
	t.Helper()
	root := t.TempDir()
	secret := []byte("replay-secret")
	secretFile, backing := filepath.Join(root, "secret"), filepath.Join(root, "backing")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	servers := make([]*handServer, len(extra))
	for i := range extra {
		dir := filepath.Join(root, fmt.Sprintf("server-%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := &handServer{ready: filepath.Join(dir, "ready"), logFile: filepath.Join(dir, "server.log"), secret: secret,
			cacheDir: filepath.Join(dir, "cache"), backing: backing}
		s.args = append([]string{"server", "--backing", s.backing, "--cache-dir", s.cacheDir,
			"--capacity", "16Mi", "--secret-file", secretFile, "--index", strconv.Itoa(i), "--servers", strconv.Itoa(len(extra)),
			"--listen", "127.0.0.1:0", "--control", "127.0.0.1:0", "--ready-file", s.ready}, extra[i]...)
		t.Cleanup(func() {
			if s.cmd != nil {
				s.stop(t, syscall.SIGKILL)
			}
			if t.Failed() {
				b, _ := os.ReadFile(s.logFile)
				t.Logf("log of server %d:\n%s", i, b)
			}
		})
		servers[i] = s
	}
	return servers
}

// start starts the server and waits until it serves.
func (s *handServer) start(t *testing.T) {
	t.Helper()
	_ = os.Remove(s.ready)
	logw, err := os.OpenFile(s.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logw.Close()
	s.cmd = exec.Command(bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = logw, logw
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan error, 1)
	go func(cmd *exec.Cmd, exited chan error) { exited <- cmd.Wait() }(s.cmd, s.exited)
	deadline := time.After(30 * time.Second)
	for {
		if b, err := os.ReadFile(s.ready); err == nil {
			var info struct {
				Control string
				Data    control.Path
			}
			if json.Unmarshal(b, &info) == nil && info.Control != "" {
				s.control, s.data = info.Control, string(info.Data)
				return
			}
		}
		select {
		case err := <-s.exited:
			s.cmd = nil
			t.Fatalf("server exited before serving: %v", err)
		case <-deadline:
			t.Fatal("server did not serve within 30 s")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop sends sig to the server and waits until it exits.
func (s *handServer) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("server did not exit within 30 s of %v", sig)
	}
	s.cmd = nil
}

// recorder passes calls on and keeps the last, as someone on the network
// between a caller and a server could.
type recorder struct {
	mu   sync.Mutex
	call capturedCall
}

// capturedCall is a call as it crossed the network, and when.
type capturedCall struct {
	method, uri, auth string
	body              []byte
	at                time.Time
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.mu.Lock()
	r.call = capturedCall{method: req.Method, uri: req.URL.RequestURI(), auth: req.Header.Get("Authorization"), body: body, at: time.Now()}
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) last() capturedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.call
}

// sendTo sends the call again, byte for byte, to the control address addr,
// and returns the answer's status and body.
func (c capturedCall) sendTo(t *testing.T, addr string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), c.method, "http://"+addr+c.uri, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", c.auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
