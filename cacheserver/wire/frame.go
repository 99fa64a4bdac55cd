package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// Op identifies the operation of a request. The values are part of the
// protocol: never renumber them.
type Op uint32

const (
	// MaxMeta is the largest metadata section a peer accepts.
	MaxMeta = 16 << 20
	// MaxData is the largest data section a peer accepts.
	MaxData = 64 << 20

	headerSize = 20
)

// ErrProtocol is returned when a peer sends a malformed frame. It wraps
// syscall.EPROTO.
var ErrProtocol = fmt.Errorf("wire protocol violation: %w", syscall.EPROTO)

type header struct {
	id        uint64
	code      uint32
	meta, dat uint32
}

func (h header) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], h.id)
	binary.LittleEndian.PutUint32(b[8:], h.code)
	binary.LittleEndian.PutUint32(b[12:], h.meta)
	binary.LittleEndian.PutUint32(b[16:], h.dat)
}

func readHeader(r io.Reader, b []byte) (header, error) {
	if _, err := io.ReadFull(r, b[:headerSize]); err != nil {
		return header{}, err
	}
	h := header{
		id:   binary.LittleEndian.Uint64(b[0:]),
		code: binary.LittleEndian.Uint32(b[8:]),
		meta: binary.LittleEndian.Uint32(b[12:]),
		dat:  binary.LittleEndian.Uint32(b[16:]),
	}
	if h.meta > MaxMeta || h.dat > MaxData {
		return h, fmt.Errorf("%w: frame of %d+%d bytes", ErrProtocol, h.meta, h.dat)
	}
	return h, nil
}

// directRead is the smallest read that bypasses a connection's read buffer
// once the buffer is drained.
const directRead = 64 << 10

// readFull fills p from r, a buffered reader of nc. Past what r holds
// already, a large p is read straight from nc, so that file data is not
// copied through the buffer; a small one goes through it, which then picks
// up the frames that follow in the same system call.
func readFull(r *bufio.Reader, nc io.Reader, p []byte) error {
	n := 0
	if b := r.Buffered(); b > 0 {
		n, _ = r.Read(p[:min(len(p), b)])
	}
	if len(p)-n < directRead {
		_, err := io.ReadFull(r, p[n:])
		return err
	}
	_, err := io.ReadFull(nc, p[n:])
	return err
}

// Encoder appends values to a metadata section.
type Encoder struct{ b []byte }

// Bytes returns the encoded section.
func (e *Encoder) Bytes() []byte { return e.b }

// Uint64 appends v.
func (e *Encoder) Uint64(v uint64) *Encoder {
	e.b = binary.LittleEndian.AppendUint64(e.b, v)
	return e
}

// Uint32 appends v.
func (e *Encoder) Uint32(v uint32) *Encoder {
	e.b = binary.LittleEndian.AppendUint32(e.b, v)
	return e
}

// Int64 appends v.
func (e *Encoder) Int64(v int64) *Encoder { return e.Uint64(uint64(v)) }

// Bool appends v as one byte.
func (e *Encoder) Bool(v bool) *Encoder {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
	return e
}

// String appends s, length first.
func (e *Encoder) String(s string) *Encoder {
	e.Uint32(uint32(len(s)))
	e.b = append(e.b, s...)
	return e
}

// Blob appends p, length first.
func (e *Encoder) Blob(p []byte) *Encoder {
	e.Uint32(uint32(len(p)))
	e.b = append(e.b, p...)
	return e
}

// credCaps marks, in the group count of an identity, that the capabilities
// follow the groups.
const credCaps = 0x8000

// Cred appends an identity. Its capabilities go along only when they are
// known (ident.Cred.HasCaps); only a server that takes them may be sent
// them (Client.SendCaps).
func (e *Encoder) Cred(c ident.Cred) *Encoder {
	e.Uint32(c.UID).Uint32(c.GID)
	groups := c.Groups[:min(len(c.Groups), credCaps-1)]
	n := uint16(len(groups))
	if c.HasCaps {
		n |= credCaps
	}
	e.b = binary.LittleEndian.AppendUint16(e.b, n)
	for _, g := range groups {
		e.Uint32(g)
	}
	if c.HasCaps {
		e.Uint64(uint64(c.Caps & ident.FSCaps))
	}
	return e
}

// Decoder reads values from a metadata section. After the first error every
// read returns a zero value and Err reports the error.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns ErrProtocol if a read ran past the end of the section.
func (d *Decoder) Err() error { return d.err }

// More reports whether values are left to read: a section may end with
// optional values that older peers do not send.
func (d *Decoder) More() bool { return d.err == nil && len(d.b) > 0 }

func (d *Decoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) || n < 0 {
		d.err = fmt.Errorf("%w: short metadata", ErrProtocol)
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

// Uint64 reads a uint64.
func (d *Decoder) Uint64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// Uint32 reads a uint32.
func (d *Decoder) Uint32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

// Int64 reads an int64.
func (d *Decoder) Int64() int64 { return int64(d.Uint64()) }

// Bool reads a bool.
func (d *Decoder) Bool() bool {
	p := d.take(1)
	return p != nil && p[0] != 0
}

// String reads a string.
func (d *Decoder) String() string { return string(d.Blob()) }

// Blob reads a byte slice; it aliases the section.
func (d *Decoder) Blob() []byte {
	n := d.Uint32()
	return d.take(int(n))
}

// Cred reads an identity.
func (d *Decoder) Cred() ident.Cred {
	c := ident.Cred{UID: d.Uint32(), GID: d.Uint32()}
	var n uint16
	if p := d.take(2); p != nil {
		n = binary.LittleEndian.Uint16(p)
	}
	for range n &^ credCaps {
		c.Groups = append(c.Groups, d.Uint32())
	}
	if n&credCaps != 0 {
		c.Caps, c.HasCaps = ident.Caps(d.Uint64())&ident.FSCaps, true
	}
	return c
}
