package wire

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestUnixSocket serves over a Unix domain socket, replaces the socket file
// of a server that is gone, and refuses the socket of one that serves.
func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil { // left behind by a dead server
		t.Fatal(err)
	}
	ln, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket file: %v", err)
	}
	s := &Server{Handler: HandlerFunc(testHandler), Secret: []byte("k")}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	cl := newClient(t, path, "k")
	rep, err := cl.Do(context.Background(), &Call{Op: opEcho, Args: (&Encoder{}).String("hi").Bytes(), Data: []byte("data")})
	if err != nil || NewDecoder(rep.Meta).String() != "hi" || string(rep.Data) != "data" {
		t.Fatalf("call over the socket: %v, %q", err, rep.Data)
	}
	if _, err := Listen(path); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("Listen on a socket a server answers on: %v, want EADDRINUSE", err)
	}
}
