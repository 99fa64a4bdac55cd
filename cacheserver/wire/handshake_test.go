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

	"github.com/burstcache/burstcache/cacheserver/ident"
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
				hello := append(append([]byte{}, helloMagic...), make([]byte, nonceSize)...)
				_, _ = rand.Read(hello[len(helloMagic):])
				answer := make([]byte, len(answerV2)+nonceSize+sha256.Size)
				if _, err := c.Write(hello); err != nil {
					return
				}
				if _, err := io.ReadFull(c, answer); err != nil {
					return
				}
				reply := binary.LittleEndian.AppendUint32(nil, 0)
				if _, err := c.Write(append(reply, prove(hello[len(helloMagic):], answer)...)); err != nil {
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
			return proof([]byte("guess"), serverLabel, sn, answer[len(answerV2):len(answerV2)+nonceSize])
		},
		"the client's proof sent back": func(_, answer []byte) []byte {
			return answer[len(answerV2)+nonceSize:]
		},
		"no secret": func(sn, answer []byte) []byte {
			return proof(nil, serverLabel, sn, answer[len(answerV2):len(answerV2)+nonceSize])
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

// TestFirstReleaseMountsAreServed checks that a server admits a mount of
// the first release, which proves the secret with an HMAC of the server's
// nonce alone and sends its requests untagged: such a mount keeps running
// in its mount pod when the instance's servers are upgraded. It must still
// prove the secret.
func TestFirstReleaseMountsAreServed(t *testing.T) {
	addr := startServer(t, "s3cret")
	for _, tc := range []struct {
		secret string
		admit  bool
	}{{"s3cret", true}, {"guess", false}} {
		c, status := answerAsFirstRelease(t, addr, tc.secret)
		if admitted := status == 0; admitted != tc.admit {
			t.Fatalf("first-release answer with secret %q: admitted %v, want %v", tc.secret, admitted, tc.admit)
		}
		if !tc.admit {
			continue
		}
		var e Encoder
		meta := e.Cred(ident.Cred{UID: 1000, GID: 1000}).Bytes()
		frame := make([]byte, headerSize, headerSize+len(meta))
		header{id: 7, code: uint32(opWhoAmI), meta: uint32(len(meta))}.put(frame)
		if _, err := c.Write(append(frame, meta...)); err != nil {
			t.Fatal(err)
		}
		hb := make([]byte, headerSize)
		h, err := readHeader(c, hb)
		if err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, h.meta)
		if _, err := io.ReadFull(c, reply); err != nil {
			t.Fatal(err)
		}
		if got := NewDecoder(reply).Cred(); h.id != 7 || h.code != 0 || got.UID != 1000 {
			t.Fatalf("untagged request of a first-release mount: id %d, code %d, uid %d; want it served as uid 1000", h.id, h.code, got.UID)
		}
	}
}

// answerAsFirstRelease connects to the server at addr and answers its hello
// as a mount of the first release that proves secret. It returns the
// connection, closed when the test ends, and the status the server sent.
func answerAsFirstRelease(t *testing.T, addr, secret string) (net.Conn, syscall.Errno) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	hello := make([]byte, len(helloMagic)+nonceSize)
	if _, err := io.ReadFull(c, hello); err != nil {
		t.Fatal(err)
	}
	answer := append(append([]byte{}, answerV1...), proofV1([]byte(secret), hello[len(helloMagic):])...)
	if _, err := c.Write(answer); err != nil {
		t.Fatal(err)
	}
	status := make([]byte, 4)
	if _, err := io.ReadFull(c, status); err != nil {
		t.Fatal(err)
	}
	return c, syscall.Errno(binary.LittleEndian.Uint32(status))
}
