package wire

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

func newMountKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startMountServer starts a server that admits only clients that sign
// with one of keys besides proving secret.
func startMountServer(t *testing.T, secret string, keys ...ed25519.PrivateKey) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: HandlerFunc(testHandler), Secret: []byte(secret)}
	for _, k := range keys {
		s.MountKeys = append(s.MountKeys, k.Public().(ed25519.PublicKey))
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), s
}

// TestServersThatAskForMountKeysAdmitOnlyMounts: a server that acts as its
// callers believes the identity every request names, and whoever may read
// the instance's Secret holds the shared secret. Told the public half of
// the node plugin's mount key, a server must admit only clients that also
// sign with its private half, and serve them as before.
func TestServersThatAskForMountKeysAdmitOnlyMounts(t *testing.T) {
	mountKey, otherKey := newMountKey(t), newMountKey(t)
	addr, srv := startMountServer(t, "s3cret", otherKey, mountKey)
	// A client refused with a signed answer tries once more unsigned, as
	// for a server of an earlier release (see greet): refusals counts the
	// connections the server refuses.
	tests := map[string]struct {
		secret   string
		key      ed25519.PrivateKey
		wantErr  error
		refusals uint64
	}{
		"a mount":                        {secret: "s3cret", key: mountKey},
		"the secret without a mount key": {secret: "s3cret", wantErr: ErrMountKeyRefused, refusals: 1},
		"the secret with another key":    {secret: "s3cret", key: newMountKey(t), wantErr: ErrMountKeyRefused, refusals: 1},
		"a mount key without the secret": {secret: "guess", key: mountKey, wantErr: ErrUnauthenticated, refusals: 2},
	}
	refused := uint64(0)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cl := NewClient(addr, ClientOptions{Secret: []byte(tc.secret), MountKey: tc.key, Conns: 1, DialTimeout: time.Second})
			defer cl.Close()
			resp, err := cl.Do(context.Background(), &Call{Op: opWhoAmI, Cred: ident.Cred{UID: 1234, GID: 1234}})
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("a call of a client with the secret and the mount key: %v", err)
				}
				if got := NewDecoder(resp.Meta).Cred(); got.UID != 1234 {
					t.Fatalf("the call was served as uid %d, want the 1234 it named", got.UID)
				}
				return
			}
			refused += tc.refusals
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, syscall.EACCES) || !errors.Is(err, ErrUnreachable) {
				t.Fatalf("a call of a client with %s: %v, want %v", name, err, tc.wantErr)
			}
		})
	}
	// The server counts a refusal after it answered it.
	deadline := time.Now().Add(5 * time.Second)
	for srv.Refused() < refused && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := srv.Refused(); got != refused {
		t.Errorf("the server counts %d refused clients, want %d", got, refused)
	}
}

// TestServersThatAskForMountKeysRefuseFirstReleaseMounts: the answer of a
// first-release mount carries no signature, so a server that admits only
// mounts refuses it, whatever secret it proves.
func TestServersThatAskForMountKeysRefuseFirstReleaseMounts(t *testing.T) {
	addr, _ := startMountServer(t, "s3cret", newMountKey(t))
	if _, got := answerAsFirstRelease(t, addr, "s3cret"); got != refusedMountKey {
		t.Fatalf("the answer of a first-release mount with the secret: status %v, want %v", got, refusedMountKey)
	}
}

// TestMountKeysAreOptionalForServers: a server not told of mount keys
// admits clients that sign as it does those that do not, so that the node
// plugin may give every mount its key.
func TestMountKeysAreOptionalForServers(t *testing.T) {
	addr := startServer(t, "s3cret")
	cl := NewClient(addr, ClientOptions{Secret: []byte("s3cret"), MountKey: newMountKey(t), Conns: 1, DialTimeout: time.Second})
	defer cl.Close()
	if _, err := cl.Do(context.Background(), &Call{Op: opWhoAmI}); err != nil {
		t.Fatalf("a signing client of a server without mount keys: %v", err)
	}
}

// TestMountKeyClientsReachServersOfEarlierReleases: a server of an earlier
// release knows no signed answer and refuses it as it refuses a wrong
// secret. A client with a mount key must then connect again and answer
// unsigned, so that mounts the node plugin starts with a key reach the
// servers of instances made before it had one.
func TestMountKeyClientsReachServersOfEarlierReleases(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go earlierReleaseServer(c, []byte("s3cret"))
		}
	}()
	dial := func() (net.Conn, error) { return net.DialTimeout("tcp", ln.Addr().String(), time.Second) }
	nc, key, err := greet(ln.Addr().String(), Credentials{Secret: []byte("s3cret"), MountKey: newMountKey(t)}, dial)
	if err != nil {
		t.Fatalf("a client with a mount key greeting a server of an earlier release: %v", err)
	}
	nc.Close()
	if len(key) == 0 || conns.Load() != 2 {
		t.Errorf("session key of %d bytes after %d connections; want one after two", len(key), conns.Load())
	}
	_, _, err = greet(ln.Addr().String(), Credentials{Secret: []byte("guess"), MountKey: newMountKey(t)}, dial)
	if !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a client with another secret: %v, want ErrUnauthenticated", err)
	}
}

// earlierReleaseServer answers one client as the handshake of a server of
// the release before mount keys did: "BCW2" only.
func earlierReleaseServer(c net.Conn, secret []byte) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	hello := append(append([]byte{}, helloMagic...), make([]byte, nonceSize)...)
	if _, err := c.Write(hello); err != nil {
		return
	}
	sn := hello[len(helloMagic):]
	version := make([]byte, len(answerV2))
	if _, err := io.ReadFull(c, version); err != nil {
		return
	}
	eacces := binary.LittleEndian.AppendUint32(nil, uint32(syscall.EACCES))
	if string(version) != string(answerV2) {
		_, _ = c.Write(eacces)
		return
	}
	rest := make([]byte, nonceSize+sha256.Size)
	if _, err := io.ReadFull(c, rest); err != nil {
		return
	}
	cn := rest[:nonceSize]
	if string(rest[nonceSize:]) != string(proof(secret, clientLabel, sn, cn)) {
		_, _ = c.Write(eacces)
		return
	}
	_, _ = c.Write(append(binary.LittleEndian.AppendUint32(nil, 0), proof(secret, serverLabel, sn, cn)...))
	_, _ = io.Copy(io.Discard, c)
}
