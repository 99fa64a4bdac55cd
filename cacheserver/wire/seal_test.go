package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// tamperProxy relays one client's connection to addr, passing the
// handshake as it is and each request frame through tamper, which returns
// the frames to send on in its place.
func tamperProxy(t *testing.T, addr string, tamper func(frame []byte) [][]byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer s.Close()
		go func() { _, _ = io.Copy(c, s) }()
		// The client's answer to the server's hello.
		if _, err := io.CopyN(s, c, int64(len(answerV2)+nonceSize+32)); err != nil {
			return
		}
		for {
			frame := make([]byte, headerSize)
			if _, err := io.ReadFull(c, frame); err != nil {
				return
			}
			n := binary.LittleEndian.Uint32(frame[12:]) + binary.LittleEndian.Uint32(frame[16:])
			frame = append(frame, make([]byte, n)...)
			if _, err := io.ReadFull(c, frame[headerSize:]); err != nil {
				return
			}
			for _, f := range tamper(frame) {
				if _, err := s.Write(f); err != nil {
					return
				}
			}
		}
	}()
	return ln.Addr().String()
}

// TestTamperedRequestsAreRefused checks that a request altered, replayed
// or dropped between a client and a server is never served: an attacker on
// the path must not speak for another identity (a server acting as the
// caller would act as it on the backing store) nor repeat a caller's
// request.
func TestTamperedRequestsAreRefused(t *testing.T) {
	const uid = 1000
	tests := map[string]struct {
		tamper func(frame []byte) [][]byte
		served int // requests the server may serve
	}{
		"as it was": {tamper: func(f []byte) [][]byte { return [][]byte{f} }, served: 2},
		"another identity": {tamper: func(f []byte) [][]byte {
			binary.LittleEndian.PutUint32(f[headerSize:], 0)
			return [][]byte{f}
		}},
		"another operation": {tamper: func(f []byte) [][]byte {
			binary.LittleEndian.PutUint32(f[8:], uint32(opEcho))
			return [][]byte{f}
		}},
		"replayed": {tamper: func(f []byte) [][]byte { return [][]byte{f, f} }, served: 1},
		"dropped": {tamper: func() func([]byte) [][]byte {
			first := true
			return func(f []byte) [][]byte {
				if first {
					first = false
					return nil
				}
				return [][]byte{f}
			}
		}()},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var served []ident.Cred
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := &Server{Secret: []byte("s3cret"), Handler: HandlerFunc(func(ctx context.Context, req *Request, resp *Response) {
				mu.Lock()
				served = append(served, req.Cred)
				mu.Unlock()
				testHandler(ctx, req, resp)
			})}
			go func() { _ = s.Serve(ln) }()
			defer s.Close()
			cl := NewClient(tamperProxy(t, ln.Addr().String(), tt.tamper), ClientOptions{Secret: []byte("s3cret"), Conns: 1, DialTimeout: time.Second})
			defer cl.Close()
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				_, _ = cl.Do(ctx, &Call{Op: opWhoAmI, Cred: ident.Cred{UID: uid, GID: uid}})
				cancel()
			}
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if len(served) != tt.served {
				t.Errorf("the server served %d requests, want %d", len(served), tt.served)
			}
			for _, c := range served {
				if c.UID != uid {
					t.Errorf("the server served a request as uid %d", c.UID)
				}
			}
		})
	}
}

func TestSealerRefusesShortMetadata(t *testing.T) {
	if _, err := newSealer([]byte("k")).open(make([]byte, headerSize), make([]byte, tagSize-1)); !errors.Is(err, ErrForged) {
		t.Fatalf("open of a section shorter than a tag: %v, want ErrForged", err)
	}
}
