package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"syscall"
)

// helloMagic starts a server's hello, the same in every release so far.
// The client's answer starts with the version it speaks: answerV2 (mutual
// proof, tagged requests) from clients of this release, answerV1 (its proof
// alone) from mounts of the first release, which a server still admits so
// that mounts running when their servers are upgraded go on working.
var (
	helloMagic = []byte("BCW1")
	answerV1   = []byte("BCW1")
	answerV2   = []byte("BCW2")
)

const nonceSize = 32

// ErrUnauthenticated is returned when a server refuses a client's proof of the
// shared secret. It wraps syscall.EACCES.
var ErrUnauthenticated = fmt.Errorf("server refused the handshake (another shared secret, or a server of a release before mutual proofs): %w", syscall.EACCES)

// ErrImpostor is returned when the peer at a server's address does not
// prove that it holds the shared secret: it is not a server of the
// instance, and nothing may be written to it. It wraps ErrUnreachable and
// syscall.EHOSTUNREACH, as the server the client wanted is not there.
var ErrImpostor = fmt.Errorf("%w: the peer did not prove the shared secret: %w", ErrUnreachable, syscall.EHOSTUNREACH)

// Each side proves the secret over both nonces under its own label, so that
// neither proof can be sent back as the other. The session key of a
// connection is made the same way under a third.
const (
	clientLabel  = "burstcache client"
	serverLabel  = "burstcache server"
	sessionLabel = "burstcache session"
)

func proof(secret []byte, label string, serverNonce, clientNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(serverNonce)
	m.Write(clientNonce)
	return m.Sum(nil)
}

// proofV1 is the proof of a first-release client: an HMAC of the server's
// nonce alone.
func proofV1(secret, serverNonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(serverNonce)
	return m.Sum(nil)
}

// serverHandshake challenges a new client, admits it only if it proves
// that it holds secret, and then proves the same to it. It returns the
// connection's session key, or nil for a first-release client, whose
// requests carry no tags.
func serverHandshake(rw io.ReadWriter, secret []byte) ([]byte, error) {
	hello := make([]byte, len(helloMagic)+nonceSize)
	copy(hello, helloMagic)
	if _, err := rand.Read(hello[len(helloMagic):]); err != nil {
		return nil, err
	}
	if _, err := rw.Write(hello); err != nil {
		return nil, err
	}
	sn := hello[len(helloMagic):]
	version := make([]byte, len(answerV2))
	if _, err := io.ReadFull(rw, version); err != nil {
		return nil, err
	}
	refuse := func() ([]byte, error) {
		_, _ = rw.Write(binary.LittleEndian.AppendUint32(nil, uint32(syscall.EACCES)))
		return nil, ErrUnauthenticated
	}
	switch {
	case bytes.Equal(version, answerV2):
		rest := make([]byte, nonceSize+sha256.Size)
		if _, err := io.ReadFull(rw, rest); err != nil {
			return nil, err
		}
		cn := rest[:nonceSize]
		if !hmac.Equal(rest[nonceSize:], proof(secret, clientLabel, sn, cn)) {
			return refuse()
		}
		reply := binary.LittleEndian.AppendUint32(nil, 0)
		if _, err := rw.Write(append(reply, proof(secret, serverLabel, sn, cn)...)); err != nil {
			return nil, err
		}
		return sessionKey(secret, sn, cn), nil
	case bytes.Equal(version, answerV1):
		mac := make([]byte, sha256.Size)
		if _, err := io.ReadFull(rw, mac); err != nil {
			return nil, err
		}
		if !hmac.Equal(mac, proofV1(secret, sn)) {
			return refuse()
		}
		_, err := rw.Write(binary.LittleEndian.AppendUint32(nil, 0))
		return nil, err
	}
	return refuse()
}

// clientHandshake answers a server's challenge with a proof of secret and
// checks the server's proof of it in turn. It returns the connection's
// session key.
func clientHandshake(rw io.ReadWriter, secret []byte) ([]byte, error) {
	hello := make([]byte, len(helloMagic)+nonceSize)
	if _, err := io.ReadFull(rw, hello); err != nil {
		return nil, fmt.Errorf("reading server hello: %w", err)
	}
	if !bytes.Equal(hello[:len(helloMagic)], helloMagic) {
		return nil, fmt.Errorf("%w: not a burstcache server", ErrProtocol)
	}
	sn := hello[len(helloMagic):]
	cn := make([]byte, nonceSize)
	if _, err := rand.Read(cn); err != nil {
		return nil, err
	}
	answer := append(append(append([]byte{}, answerV2...), cn...), proof(secret, clientLabel, sn, cn)...)
	if _, err := rw.Write(answer); err != nil {
		return nil, err
	}
	status := make([]byte, 4)
	if _, err := io.ReadFull(rw, status); err != nil {
		return nil, fmt.Errorf("reading handshake status: %w", err)
	}
	if binary.LittleEndian.Uint32(status) != 0 {
		return nil, ErrUnauthenticated
	}
	mac := make([]byte, sha256.Size)
	if _, err := io.ReadFull(rw, mac); err != nil {
		return nil, fmt.Errorf("reading the server's proof: %w", err)
	}
	if !hmac.Equal(mac, proof(secret, serverLabel, sn, cn)) {
		return nil, ErrImpostor
	}
	return sessionKey(secret, sn, cn), nil
}
