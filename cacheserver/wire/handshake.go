package wire

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// helloMagic starts a server's hello, the same in every release so far.
// The client's answer starts with the version it speaks: answerV2 (mutual
// proof, tagged requests) from clients of this release, answerV1 (its proof
// alone) from mounts of the first release, which a server still admits so
// that mounts running when their servers are upgraded go on working.
//
// answerV3 is answerV2 followed by a signature with the mount key, from
// clients given one (Credentials.MountKey): servers told to admit only
// mounts (Server.MountKeys) take no other answer.
var (
	helloMagic = []byte("BCW1")
	answerV1   = []byte("BCW1")
	answerV2   = []byte("BCW2")
	answerV3   = []byte("BCW3")
)

const nonceSize = 32

// ErrUnauthenticated is returned when a server refuses a client's proof of the
// shared secret. It wraps syscall.EACCES.
var ErrUnauthenticated = fmt.Errorf("server refused the handshake (another shared secret, or a server of a release before mutual proofs): %w", syscall.EACCES)

// ErrMountKeyRefused is returned when a server that admits only mounts,
// which prove the mount key of the cluster's node plugin, refuses a client:
// it has no mount key, or another. It wraps syscall.EACCES.
var ErrMountKeyRefused = fmt.Errorf("server admits only mounts of the node plugin, and refused this client's mount key (none, or another): %w", syscall.EACCES)

// Credentials are what a client proves to servers.
type Credentials struct {
	// Secret is the instance's shared secret.
	Secret []byte
	// MountKey, if set, signs the handshake, for servers that admit only
	// mounts (Server.MountKeys): whoever holds the shared secret alone
	// cannot speak for callers to them.
	MountKey ed25519.PrivateKey
}

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
	mountLabel   = "burstcache mount"
)

// mountMessage is what a mount key signs: both nonces, under a label of
// its own.
func mountMessage(serverNonce, clientNonce []byte) []byte {
	return append(append([]byte(mountLabel), serverNonce...), clientNonce...)
}

// refusedMountKey is the status a server that admits only mounts answers
// a client that did not prove a mount key. Servers of earlier releases
// answer EACCES to an answer they do not know, such as answerV3.
const refusedMountKey = syscall.EPERM

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
// that it holds secret, and, when mountKeys is not empty, one of the mount
// keys, and then proves the secret to it. It returns the connection's
// session key, or nil for a first-release client, whose requests carry no
// tags.
func serverHandshake(rw io.ReadWriter, secret []byte, mountKeys []ed25519.PublicKey) ([]byte, error) {
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
	refuseMount := func() ([]byte, error) {
		_, _ = rw.Write(binary.LittleEndian.AppendUint32(nil, uint32(refusedMountKey)))
		return nil, ErrMountKeyRefused
	}
	switch {
	case bytes.Equal(version, answerV2), bytes.Equal(version, answerV3):
		signed := bytes.Equal(version, answerV3)
		rest := make([]byte, nonceSize+sha256.Size, nonceSize+sha256.Size+ed25519.SignatureSize)
		if signed {
			rest = rest[:cap(rest)]
		}
		if _, err := io.ReadFull(rw, rest); err != nil {
			return nil, err
		}
		cn := rest[:nonceSize]
		if !hmac.Equal(rest[nonceSize:nonceSize+sha256.Size], proof(secret, clientLabel, sn, cn)) {
			return refuse()
		}
		if len(mountKeys) > 0 && (!signed || !signedByOneOf(mountKeys, mountMessage(sn, cn), rest[nonceSize+sha256.Size:])) {
			return refuseMount()
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
		if len(mountKeys) > 0 {
			return refuseMount()
		}
		_, err := rw.Write(binary.LittleEndian.AppendUint32(nil, 0))
		return nil, err
	}
	return refuse()
}

// greet connects with dial and answers the server's challenge, signed when
// creds has a mount key. A server of an earlier release refuses a signed
// answer as it would a wrong secret, so such a refusal is followed by one
// more connection, answered unsigned, which a server that admits only
// mounts refuses in turn. Errors of dial are returned as they are.
func greet(addr string, creds Credentials, dial func() (net.Conn, error)) (net.Conn, []byte, error) {
	sign := creds.MountKey != nil
	for {
		nc, err := dial()
		if err != nil {
			return nil, nil, err
		}
		key, err := clientHandshake(nc, creds, sign)
		if err == nil {
			return nc, key, nil
		}
		_ = nc.Close()
		if !sign || !errors.Is(err, ErrUnauthenticated) {
			return nil, nil, fmt.Errorf("handshake with cache server %s: %w: %w", addr, ErrUnreachable, err)
		}
		sign = false
	}
}

// signedByOneOf reports whether sig is a signature of msg by one of keys.
func signedByOneOf(keys []ed25519.PublicKey, msg, sig []byte) bool {
	for _, k := range keys {
		if ed25519.Verify(k, msg, sig) {
			return true
		}
	}
	return false
}

// clientHandshake answers a server's challenge with a proof of the secret,
// signed with the mount key when sign is true, and checks the server's
// proof of the secret in turn. It returns the connection's session key.
func clientHandshake(rw io.ReadWriter, creds Credentials, sign bool) ([]byte, error) {
	secret := creds.Secret
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
	version := answerV2
	if sign {
		version = answerV3
	}
	answer := append(append(append([]byte{}, version...), cn...), proof(secret, clientLabel, sn, cn)...)
	if sign {
		answer = append(answer, ed25519.Sign(creds.MountKey, mountMessage(sn, cn))...)
	}
	if _, err := rw.Write(answer); err != nil {
		return nil, err
	}
	status := make([]byte, 4)
	if _, err := io.ReadFull(rw, status); err != nil {
		return nil, fmt.Errorf("reading handshake status: %w", err)
	}
	switch syscall.Errno(binary.LittleEndian.Uint32(status)) {
	case 0:
	case refusedMountKey:
		return nil, ErrMountKeyRefused
	default:
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
