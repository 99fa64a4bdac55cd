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

var magic = []byte("BCW1")

// ErrUnauthenticated is returned when a server refuses a client's proof of the
// shared secret. It wraps syscall.EACCES.
var ErrUnauthenticated = fmt.Errorf("server refused the shared secret: %w", syscall.EACCES)

func proof(secret, nonce []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(nonce)
	return m.Sum(nil)
}

// serverHandshake challenges a new client and admits it only if it proves
// that it holds secret.
func serverHandshake(rw io.ReadWriter, secret []byte) error {
	hello := make([]byte, 4+32)
	copy(hello, magic)
	if _, err := rand.Read(hello[4:]); err != nil {
		return err
	}
	if _, err := rw.Write(hello); err != nil {
		return err
	}
	answer := make([]byte, 4+32)
	if _, err := io.ReadFull(rw, answer); err != nil {
		return err
	}
	status := uint32(0)
	ok := bytes.Equal(answer[:4], magic) && hmac.Equal(answer[4:], proof(secret, hello[4:]))
	if !ok {
		status = uint32(syscall.EACCES)
	}
	if _, err := rw.Write(binary.LittleEndian.AppendUint32(nil, status)); err != nil {
		return err
	}
	if !ok {
		return ErrUnauthenticated
	}
	return nil
}

// clientHandshake answers a server's challenge with a proof of secret.
func clientHandshake(rw io.ReadWriter, secret []byte) error {
	hello := make([]byte, 4+32)
	if _, err := io.ReadFull(rw, hello); err != nil {
		return fmt.Errorf("reading server hello: %w", err)
	}
	if !bytes.Equal(hello[:4], magic) {
		return fmt.Errorf("%w: not a burstcache server", ErrProtocol)
	}
	answer := append(append([]byte{}, magic...), proof(secret, hello[4:])...)
	if _, err := rw.Write(answer); err != nil {
		return err
	}
	status := make([]byte, 4)
	if _, err := io.ReadFull(rw, status); err != nil {
		return fmt.Errorf("reading handshake status: %w", err)
	}
	if binary.LittleEndian.Uint32(status) != 0 {
		return ErrUnauthenticated
	}
	return nil
}
