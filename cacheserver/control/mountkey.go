package control

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// A mount key tells the mounts of an instance from everyone else who holds
// its shared secret. A server that acts as its callers believes the
// identity that a client sends with each request, and the shared secret is
// in a Secret of the instance's namespace, which users who may edit the
// namespace can read. Such a server is therefore given the public half of
// a mount key (`burstcache server --mount-public-key`) and admits only
// clients that sign their handshake with the private half (`burstcache
// mount --mount-key-file`), which only the node plugin holds.
//
// Both halves are written as the standard base64 of their raw bytes: the
// public key's 32 bytes, and the private key's 32-byte seed (RFC 8032).

// NewMountKey returns a new mount key: its private seed and its public key,
// each in base64.
func NewMountKey() (private, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generating a mount key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(priv.Seed()), base64.StdEncoding.EncodeToString(pub), nil
}

// ParseMountKey reads the private mount key s (a base64 seed; surrounding
// white space, such as a file's final newline, is ignored).
func ParseMountKey(s string) (ed25519.PrivateKey, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("a mount key is the base64 of a 32-byte seed: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("a mount key is the base64 of a 32-byte seed, not of %d bytes", len(seed))
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParseMountPublicKey reads the public mount key s (base64).
func ParseMountPublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("a public mount key is the base64 of 32 bytes: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("a public mount key is the base64 of 32 bytes, not of %d", len(b))
	}
	return ed25519.PublicKey(b), nil
}

// MountPublicKey returns the public key of the private mount key s, in
// base64.
func MountPublicKey(s string) (string, error) {
	k, err := ParseMountKey(s)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey)), nil
}
