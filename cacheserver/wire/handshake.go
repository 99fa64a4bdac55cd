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

var magic = []byte("BCW2")

const nonceSize = 32

// ErrUnauthenticated is returned when a server refuses a client's proof of the
// shared secret. It wraps syscall.EACCES.
var ErrUnauthenticated = fmt.Errorf("server refused the shared secret: %w", syscall.EACCES)

// ErrImpostor is returned when the peer at a server's address does not
// prove that it holds the shared secret: it is not a server of the
// instance, and nothing may be written to it. It wraps ErrUnreachable and
// syscall.EHOSTUNREACH, as the server the client wanted is not there.
var ErrImpostor = fmt.Errorf("%w: the peer did not prove the shared secret: %w", ErrUnreachable, syscall.EHOSTUNREACH)

// Each side proves the secret over both nonces under its own label, so that
// neither proof can be sent back as the other.
// The session key of a connection is made the same way under a third.
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

// serverHandshake challenges a new client, admits it only if it proves
// that it holds secret, and then proves the same to it. It returns the
// connection's session key.
func serverHandshake(rw io.ReadWriter, secret []byte) ([]byte, error) {
	hello := make([]byte, len(magic)+nonceSize)
	copy(hello, magic)
	if _, err := rand.Read(hello[len(magic):]); err != nil {
		return nil, err
	}
	if _, err := rw.Write(hello); err != nil {
		return nil, err
	}
	sn := hello[len(magic):]
	answer := make([]byte, len(magic)+nonceSize+sha256.Size)
	if _, err := io.ReadFull(rw, answer); err != nil {
		return nil, err
	}
	cn := answer[len(magic) : len(magic)+nonceSize]
	ok := bytes.Equal(answer[:len(magic)], magic) &&
		hmac.Equal(answer[len(magic)+nonceSize:], proof(secret, clientLabel, sn, cn))
	if !ok {
		_, _ = rw.Write(binary.LittleEndian.AppendUint32(nil, uint32(syscall.EACCES)))
		return nil, ErrUnauthenticated
	}
	reply := binary.LittleEndian.AppendUint32(nil, 0)
	reply = append(reply, proof(secret, serverLabel, sn, cn)...)
	if _, err := rw.Write(reply); err != nil {
		return nil, err
	}
	return sessionKey(secret, sn, cn), nil
}

// clientHandshake answers a server's challenge with a proof of secret and
// checks the server's proof of it in turn. It returns the connection's
// session key.
func clientHandshake(rw io.ReadWriter, secret []byte) ([]byte, error) {
	hello := make([]byte, len(magic)+nonceSize)
	if _, err := io.ReadFull(rw, hello); err != nil {
		return nil, fmt.Errorf("reading server hello: %w", err)
	}
	if !bytes.Equal(hello[:len(magic)], magic) {
		return nil, fmt.Errorf("%w: not a burstcache server, or one of another version", ErrProtocol)
	}
	sn := hello[len(magic):]
	cn := make([]byte, nonceSize)
	if _, err := rand.Read(cn); err != nil {
		return nil, err
	}
	answer := append(append(append([]byte{}, magic...), cn...), proof(secret, clientLabel, sn, cn)...)
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
