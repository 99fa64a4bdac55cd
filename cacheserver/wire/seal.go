package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
)

// tagSize is the length of the tag that ends the metadata section of every
// request: HMAC-SHA256 under the connection's session key, cut to 128 bits.
const tagSize = 16

// ErrForged is returned, and the connection closed, when a request's tag
// does not match: the request was not sent as it arrived by the client that
// did the handshake, or not in its place in the connection's order.
var ErrForged = fmt.Errorf("%w: a request does not carry its connection's tag", ErrProtocol)

// sessionKey is the key of one connection's tags, known only to the two
// peers of its handshake.
func sessionKey(secret, serverNonce, clientNonce []byte) []byte {
	return proof(secret, sessionLabel, serverNonce, clientNonce)
}

// sealer tags the requests of one connection, or checks their tags, in the
// order they cross it: the tag covers the request's number on the
// connection, its header and its metadata (the caller's identity and the
// arguments), so that a request cannot be altered, moved to another
// connection, replayed or dropped without the server noticing. The data
// section is not covered. A sealer is used by one goroutine at a time.
type sealer struct {
	mac hash.Hash
	seq uint64
	buf [sha256.Size]byte
	out [tagSize]byte // the last tag
}

func newSealer(key []byte) *sealer {
	return &sealer{mac: hmac.New(sha256.New, key)}
}

// tag returns the tag of the next request, of header hb and metadata meta,
// valid until the next call.
func (s *sealer) tag(hb, meta []byte) []byte {
	s.mac.Reset()
	binary.LittleEndian.PutUint64(s.buf[:8], s.seq)
	s.seq++
	s.mac.Write(s.buf[:8])
	s.mac.Write(hb)
	s.mac.Write(meta)
	copy(s.out[:], s.mac.Sum(s.buf[:0]))
	return s.out[:]
}

// open checks the tag that ends meta, the metadata of the next request of
// header hb, and returns the metadata without it.
func (s *sealer) open(hb, meta []byte) ([]byte, error) {
	if len(meta) < tagSize {
		return nil, ErrForged
	}
	body, got := meta[:len(meta)-tagSize], meta[len(meta)-tagSize:]
	if !hmac.Equal(s.tag(hb, body), got) {
		return nil, ErrForged
	}
	return body, nil
}
