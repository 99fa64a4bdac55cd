package wire

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// impostor listens where a client expects a server, admits every client
// and answers with the proof prove makes of the client's answer. It
// reports how many bytes each client sent after the handshake.
func impostor(t *testing.T, prove func(sn, answer []byte) []byte) (string, <-chan int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	sent := make(chan int, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				hello := append(append([]byte{}, magic...), make([]byte, nonceSize)...)
				_, _ = rand.Read(hello[len(magic):])
				answer := make([]byte, len(magic)+nonceSize+sha256.Size)
				if _, err := c.Write(hello); err != nil {
					return
				}
				if _, err := io.ReadFull(c, answer); err != nil {
					return
				}
				reply := binary.LittleEndian.AppendUint32(nil, 0)
				if _, err := c.Write(append(reply, prove(hello[len(magic):], answer)...)); err != nil {
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				n, _ := io.Copy(io.Discard, c)
				sent <- int(n)
			}()
		}
	}()
	return ln.Addr().String(), sent
}

// TestClientRefusesAnImpostor checks that a client sends no request to a
// peer that admits it without proving the secret, and reports the server
// as unreachable, so that no write lands where the instance cannot find it.
func TestClientRefusesAnImpostor(t *testing.T) {
	tests := map[string]func(sn, answer []byte) []byte{
		"another secret": func(sn, answer []byte) []byte {
			return proof([]byte("guess"), serverLabel, sn, answer[len(magic):len(magic)+nonceSize])
		},
		"the client's proof sent back": func(_, answer []byte) []byte {
			return answer[len(magic)+nonceSize:]
		},
		"no secret": func(sn, answer []byte) []byte {
			return proof(nil, serverLabel, sn, answer[len(magic):len(magic)+nonceSize])
		},
	}
	for name, prove := range tests {
		t.Run(name, func(t *testing.T) {
			addr, sent := impostor(t, prove)
			_, err := newClient(t, addr, "s3cret").Do(context.Background(), &Call{Op: opWhoAmI, Data: []byte("dirty data")})
			if !errors.Is(err, ErrImpostor) || !errors.Is(err, ErrUnreachable) || !errors.Is(err, syscall.EHOSTUNREACH) {
				t.Fatalf("Do against an impostor: %v, want ErrImpostor", err)
			}
			if n := <-sent; n != 0 {
				t.Errorf("the client sent the impostor %d bytes after the handshake", n)
			}
		})
	}
}
