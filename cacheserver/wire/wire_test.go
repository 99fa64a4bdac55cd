package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

const (
	opEcho Op = iota + 1
	opFail
	opWhoAmI
	opSlowRead
	opBlob
)

// blob is what opBlob answers: a prepared payload, so that benchmarks
// measure the protocol rather than the handler.
var blob = make([]byte, 1<<20)

// testHandler echoes data, fails with the errno it is given, reports the
// caller's identity, or returns n bytes of a pattern after a delay.
func testHandler(ctx context.Context, req *Request, resp *Response) {
	switch req.Op {
	case opEcho:
		resp.Meta.String(req.Args.String())
		resp.Data = resp.Buffer(len(req.Data))
		copy(resp.Data, req.Data)
	case opFail:
		resp.Err = syscall.Errno(req.Args.Uint32())
	case opWhoAmI:
		resp.Meta.Cred(req.Cred)
	case opSlowRead:
		n, delay := int(req.Args.Uint32()), time.Duration(req.Args.Int64())
		time.Sleep(delay)
		buf := resp.Buffer(n)
		for i := range buf {
			buf[i] = byte(n + i)
		}
		resp.Data = buf
	case opBlob:
		resp.Data = blob[:req.Args.Uint32()]
	default:
		resp.Err = syscall.ENOSYS
	}
}

func startServer(t *testing.T, secret string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: HandlerFunc(testHandler), Secret: []byte(secret)}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func newClient(t *testing.T, addr, secret string) *Client {
	t.Helper()
	cl := NewClient(addr, ClientOptions{Secret: []byte(secret), Conns: 2, DialTimeout: time.Second})
	t.Cleanup(func() { cl.Close() })
	return cl
}

func slowRead(n int, delay time.Duration) []byte {
	return (&Encoder{}).Uint32(uint32(n)).Int64(int64(delay)).Bytes()
}

func TestCallsCarryArgumentsDataIdentityAndErrno(t *testing.T) {
	cl := newClient(t, startServer(t, "s3cret"), "s3cret")
	ctx := context.Background()
	cred := ident.Cred{UID: 1000, GID: 100, Groups: []uint32{10, 20}}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	tests := map[string]struct {
		call     Call
		wantMeta []byte
		wantData []byte
		wantErr  error
	}{
		"echo of a 1 MiB payload": {
			call:     Call{Op: opEcho, Args: (&Encoder{}).String("name").Bytes(), Data: payload},
			wantMeta: (&Encoder{}).String("name").Bytes(), wantData: payload,
		},
		"errno comes back as itself": {
			call: Call{Op: opFail, Args: (&Encoder{}).Uint32(uint32(syscall.ENOENT)).Bytes()}, wantErr: syscall.ENOENT,
		},
		"identity travels": {
			call: Call{Op: opWhoAmI, Cred: cred}, wantMeta: (&Encoder{}).Cred(cred).Bytes(), wantData: []byte{},
		},
		"unknown op": {call: Call{Op: 99}, wantErr: syscall.ENOSYS},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rep, err := cl.Do(ctx, &tc.call)
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("Do: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.wantMeta, rep.Meta); diff != "" {
				t.Errorf("meta (-want +got):\n%s", diff)
			}
			if !bytes.Equal(rep.Data, tc.wantData) {
				t.Errorf("data: got %d bytes, want %d", len(rep.Data), len(tc.wantData))
			}
		})
	}
}

// TestResponsesOutOfOrder sends calls whose answers come back in the
// reverse order of the requests over one connection, each straight into its
// own buffer.
func TestResponsesOutOfOrder(t *testing.T) {
	cl := NewClient(startServer(t, ""), ClientOptions{Conns: 1})
	defer cl.Close()
	const calls = 8
	var wg sync.WaitGroup
	finished := make(chan int, calls)
	errs := make(chan error, calls)
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1000 + i
			dst := make([]byte, n)
			delay := time.Duration(calls-i) * 40 * time.Millisecond
			rep, err := cl.Do(context.Background(), &Call{Op: opSlowRead, Args: slowRead(n, delay), Dst: dst})
			if err == nil && (rep.N != n || dst[n-1] != byte(n+n-1)) {
				err = fmt.Errorf("call %d: got %d bytes, last %d", i, rep.N, dst[n-1])
			}
			errs <- err
			finished <- i
		}()
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if first := <-finished; first == 0 {
		t.Errorf("the slowest call finished first: responses were serialised")
	}
}

func TestHandshakeRefusesAWrongSecret(t *testing.T) {
	addr := startServer(t, "right")
	tests := map[string]string{"wrong secret": "wrong", "no secret": ""}
	for name, secret := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := newClient(t, addr, secret).Do(context.Background(), &Call{Op: opWhoAmI})
			if !errors.Is(err, ErrUnauthenticated) || !errors.Is(err, syscall.EACCES) {
				t.Fatalf("Do with secret %q: %v, want ErrUnauthenticated", secret, err)
			}
		})
	}
}

func TestUnreachableServerFailsQuickly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = newClient(t, addr, "").Do(context.Background(), &Call{Op: opWhoAmI})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Do: %v, want ECONNREFUSED", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failing took %v", d)
	}
}

// TestMissingSocketIsRefused checks that a Unix socket that is not there,
// as while a server restarts, fails as a refused connection, not with the
// ENOENT of its path, which the FUSE layer would report as the file's.
func TestMissingSocketIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone.sock")
	_, err := newClient(t, path, "").Do(context.Background(), &Call{Op: opWhoAmI})
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.Is(err, ErrUnreachable) || errors.Is(err, syscall.ENOENT) {
		t.Fatalf("Do: %v, want ECONNREFUSED and not ENOENT", err)
	}
	if _, _, err := FetchFile(context.Background(), path, Credentials{}, ident.Process(), OpSlabFile, nil); !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		t.Fatalf("FetchFile: %v, want ECONNREFUSED and not ENOENT", err)
	}
}

// TestSilentServerTimesOut checks that a peer that accepts but never says
// hello is given up on after the dial timeout.
func TestSilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	_, err = newClient(t, ln.Addr().String(), "").Do(context.Background(), &Call{Op: opWhoAmI})
	if err == nil {
		t.Fatal("Do succeeded against a silent peer")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("failing took %v", d)
	}
}

// TestPeerDyingInTheHandshakeIsUnreachable: a server that dies before it
// finishes the handshake, as one killed while it starts, was not sent the
// call, which the caller may need to know (ErrUnreachable), to end what it
// began on other servers.
func TestPeerDyingInTheHandshakeIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, err = newClient(t, ln.Addr().String(), "").Do(context.Background(), &Call{Op: opWhoAmI})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Do against a peer that hangs up: %v, want %v", err, ErrUnreachable)
	}
}

// TestCancelledCallLeavesBufferAlone abandons a call and checks that its
// buffer is not written afterwards while the connection keeps working.
func TestCancelledCallLeavesBufferAlone(t *testing.T) {
	cl := NewClient(startServer(t, ""), ClientOptions{Conns: 1})
	defer cl.Close()
	dst := make([]byte, 4096)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := cl.Do(ctx, &Call{Op: opSlowRead, Args: slowRead(4096, 200*time.Millisecond), Dst: dst}); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.EINTR) {
		t.Fatalf("Do: %v, want deadline exceeded as EINTR", err)
	}
	rep, err := cl.Do(context.Background(), &Call{Op: opSlowRead, Args: slowRead(10, 300*time.Millisecond)})
	if err != nil || rep.N != 10 {
		t.Fatalf("next call: %d bytes, %v", rep.N, err)
	}
	if !bytes.Equal(dst, make([]byte, 4096)) {
		t.Errorf("abandoned buffer was written")
	}
}

func TestServerRestartIsSurvived(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := &Server{Handler: HandlerFunc(testHandler)}
	go s.Serve(ln)
	cl := newClient(t, addr, "")
	if _, err := cl.Do(context.Background(), &Call{Op: opWhoAmI}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Fatal(err)
	}
	s2 := &Server{Handler: HandlerFunc(testHandler)}
	go s2.Serve(ln)
	defer s2.Close()
	time.Sleep(50 * time.Millisecond)
	if _, err := cl.Do(context.Background(), &Call{Op: opWhoAmI}); err != nil {
		t.Fatalf("call after restart: %v", err)
	}
}

// BenchmarkRead1MiB reads 1 MiB payloads over one client with several
// calls in flight, straight into the callers' buffers.
func BenchmarkRead1MiB(b *testing.B) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s := &Server{Handler: HandlerFunc(testHandler)}
	go s.Serve(ln)
	defer s.Close()
	cl := NewClient(ln.Addr().String(), ClientOptions{})
	defer cl.Close()
	args := (&Encoder{}).Uint32(1 << 20).Bytes()
	b.SetBytes(1 << 20)
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]byte, 1<<20)
		for pb.Next() {
			if _, err := cl.Do(context.Background(), &Call{Op: opBlob, Args: args, Dst: dst}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkWrite1MiB sends 1 MiB payloads to a server that echoes nothing.
func BenchmarkWrite1MiB(b *testing.B) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s := &Server{Handler: HandlerFunc(testHandler)}
	go s.Serve(ln)
	defer s.Close()
	cl := NewClient(ln.Addr().String(), ClientOptions{})
	defer cl.Close()
	args := (&Encoder{}).Uint32(0).Bytes()
	b.SetBytes(1 << 20)
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cl.Do(context.Background(), &Call{Op: opBlob, Args: args, Data: blob}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSmallCall measures the round trip of a call with a small answer,
// one at a time: the latency a metadata operation or a 4 KiB read pays.
func BenchmarkSmallCall(b *testing.B) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s := &Server{Handler: HandlerFunc(testHandler)}
	go s.Serve(ln)
	defer s.Close()
	cl := NewClient(ln.Addr().String(), ClientOptions{})
	defer cl.Close()
	args := (&Encoder{}).Uint32(4096).Bytes()
	dst := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.Do(context.Background(), &Call{Op: opBlob, Args: args, Dst: dst}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSmallCallsParallel measures small calls with many in flight, as
// a striped client has when several processes read at once.
func BenchmarkSmallCallsParallel(b *testing.B) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s := &Server{Handler: HandlerFunc(testHandler)}
	go s.Serve(ln)
	defer s.Close()
	cl := NewClient(ln.Addr().String(), ClientOptions{})
	defer cl.Close()
	args := (&Encoder{}).Uint32(4096).Bytes()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]byte, 4096)
		for pb.Next() {
			if _, err := cl.Do(context.Background(), &Call{Op: opBlob, Args: args, Dst: dst}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLinkCallsStayOnTheirConnection proves that a call sent on a reply's
// Link goes on that connection or fails, while the client dials anew: ids
// a server gave on one connection must never reach it on another.
func TestLinkCallsStayOnTheirConnection(t *testing.T) {
	addr := startServer(t, "")
	cl := NewClient(addr, ClientOptions{Conns: 1})
	defer cl.Close()
	rep, err := cl.Do(context.Background(), &Call{Op: opWhoAmI})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rep.Link.Do(context.Background(), &Call{Op: opWhoAmI}); err != nil || rep.Link.Lost() {
		t.Fatalf("call on a live link: %v (lost %v)", err, rep.Link.Lost())
	}
	cl.Close()
	if !rep.Link.Lost() {
		t.Fatal("the link of a closed connection is not lost")
	}
	if _, err := rep.Link.Do(context.Background(), &Call{Op: opWhoAmI}); !errors.Is(err, ErrConnLost) {
		t.Fatalf("call on a lost link = %v, want ErrConnLost", err)
	}
	again, err := cl.Do(context.Background(), &Call{Op: opWhoAmI})
	if err != nil {
		t.Fatalf("the client does not dial anew: %v", err)
	}
	if again.Link == rep.Link {
		t.Fatal("the new connection has the old link")
	}
}

// TestAnsweredTellsAnswersFromFailures: an errno the server answered means
// it is done with the request; a lost connection, which carries an errno
// too, or a server not reached, does not say whether it did anything.
func TestAnsweredTellsAnswersFromFailures(t *testing.T) {
	cl := newClient(t, startServer(t, "s3cret"), "s3cret")
	_, err := cl.Do(context.Background(), &Call{Op: opFail, Args: (&Encoder{}).Uint32(uint32(syscall.EACCES)).Bytes()})
	if !Answered(err) {
		t.Errorf("Answered(%v) = false for the server's errno", err)
	}
	_, unreached := newClient(t, filepath.Join(t.TempDir(), "gone.sock"), "").Do(context.Background(), &Call{Op: opWhoAmI})
	for _, err := range []error{nil, ErrConnLost, fmt.Errorf("op 3: %w", ErrConnLost), unreached} {
		if Answered(err) {
			t.Errorf("Answered(%v) = true, want false", err)
		}
	}
}

// TestCapabilitiesTravelOnlyWhenTheServerTakesThem sends an identity with
// capabilities: a client not told that its server takes them sends the
// identity as a first-release server reads it, and a told one sends them.
func TestCapabilitiesTravelOnlyWhenTheServerTakesThem(t *testing.T) {
	cl := newClient(t, startServer(t, "s3cret"), "s3cret")
	cred := ident.Cred{UID: 0, GID: 0, Groups: []uint32{10}, Caps: 1 << unix.CAP_CHOWN, HasCaps: true}
	tests := map[string]struct {
		sendCaps bool
		want     ident.Cred
	}{
		"server of an earlier release": {false, ident.Cred{Groups: []uint32{10}}},
		"server that takes them":       {true, cred},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cl.SendCaps(tc.sendCaps)
			rep, err := cl.Do(context.Background(), &Call{Op: opWhoAmI, Cred: cred})
			if err != nil {
				t.Fatal(err)
			}
			d := NewDecoder(rep.Meta)
			if diff := cmp.Diff(tc.want, d.Cred()); diff != "" || d.More() {
				t.Errorf("server saw (-want +got):\n%s (bytes left: %v)", diff, d.More())
			}
		})
	}
}
