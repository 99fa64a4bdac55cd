package index

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

func encodeKey(k Key) []byte {
	b := make([]byte, 0, len(k.Path)+9)
	b = append(b, k.Path...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, uint64(k.Index))
}

func decodeKey(b []byte) (Key, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 || len(b)-i-1 != 8 {
		return Key{}, fmt.Errorf("extent key %q: %w", b, ErrCorrupt)
	}
	return Key{Path: string(b[:i]), Index: int64(binary.BigEndian.Uint64(b[i+1:]))}, nil
}

func encodeExtent(e *Extent) []byte {
	b := make([]byte, 0, 24)
	for _, v := range []uint32{e.Slot, e.Valid, e.DirtyLo, e.DirtyHi} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return binary.BigEndian.AppendUint64(b, uint64(e.LastWrite))
}

func decodeExtent(b []byte) (Extent, error) {
	if len(b) != 24 {
		return Extent{}, ErrCorrupt
	}
	u := func(i int) uint32 { return binary.BigEndian.Uint32(b[4*i:]) }
	return Extent{Slot: u(0), Valid: u(1), DirtyLo: u(2), DirtyHi: u(3),
		LastWrite: int64(binary.BigEndian.Uint64(b[16:]))}, nil
}

// Flags of a file record, in the byte after its size.
const (
	fileCred     = 1 << iota // a credential follows
	fileDoomed               // File.Dooms is 1, or its count follows
	fileDooms                // File.Dooms follows, before any credential
	fileDoomedAs             // File.DoomedIno, DoomedBirth and DoomedGen follow the count, if any
	fileUnlinks              // File.Unlinks follows those, counted
	fileCaps                 // the credential's capabilities follow its groups
)

// capsOf returns the capabilities of c to record, and whether to record
// them: only when they differ from what its uid gives, so that the records
// of callers who never changed their capabilities stay readable by a
// release that knows none.
func capsOf(c *ident.Cred) (ident.Caps, bool) {
	eff := c.EffectiveCaps()
	return eff, eff != (ident.Cred{UID: c.UID}).EffectiveCaps()
}

func encodeFile(f *File) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(f.Size))
	var flags byte
	if f.Dooms > 0 {
		flags |= fileDoomed
	}
	if f.Dooms > 1 {
		flags |= fileDooms
	}
	if f.Dooms > 0 && f.DoomedIno != 0 {
		flags |= fileDoomedAs
	}
	if f.Dooms > 0 && len(f.Unlinks) > 0 {
		flags |= fileUnlinks
	}
	if f.Cred != nil {
		flags |= fileCred
		if _, ok := capsOf(f.Cred); ok {
			flags |= fileCaps
		}
	}
	b = append(b, flags)
	if f.Dooms > 1 {
		b = binary.BigEndian.AppendUint32(b, f.Dooms)
	}
	if flags&fileDoomedAs != 0 {
		b = binary.BigEndian.AppendUint64(b, f.DoomedIno)
		b = binary.BigEndian.AppendUint64(b, uint64(f.DoomedBirth))
		b = binary.BigEndian.AppendUint32(b, f.DoomedGen)
	}
	if flags&fileUnlinks != 0 {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f.Unlinks)))
		for _, u := range f.Unlinks {
			b = binary.BigEndian.AppendUint64(b, u)
		}
	}
	if f.Cred == nil {
		return b
	}
	b = binary.BigEndian.AppendUint32(b, f.Cred.UID)
	b = binary.BigEndian.AppendUint32(b, f.Cred.GID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Cred.Groups)))
	for _, g := range f.Cred.Groups {
		b = binary.BigEndian.AppendUint32(b, g)
	}
	if caps, ok := capsOf(f.Cred); ok {
		b = binary.BigEndian.AppendUint64(b, uint64(caps))
	}
	return b
}

func decodeFile(b []byte) (File, error) {
	if len(b) < 9 {
		return File{}, ErrCorrupt
	}
	f := File{Size: int64(binary.BigEndian.Uint64(b))}
	flags := b[8]
	b = b[9:]
	if flags&fileDoomed != 0 {
		f.Dooms = 1
	}
	if flags&fileDooms != 0 {
		if len(b) < 4 || flags&fileDoomed == 0 {
			return File{}, ErrCorrupt
		}
		f.Dooms = binary.BigEndian.Uint32(b)
		b = b[4:]
	}
	if flags&fileDoomedAs != 0 {
		if len(b) < 20 || flags&fileDoomed == 0 {
			return File{}, ErrCorrupt
		}
		f.DoomedIno = binary.BigEndian.Uint64(b)
		f.DoomedBirth = int64(binary.BigEndian.Uint64(b[8:]))
		f.DoomedGen = binary.BigEndian.Uint32(b[16:])
		b = b[20:]
	}
	if flags&fileUnlinks != 0 {
		if len(b) < 4 || flags&fileDoomed == 0 {
			return File{}, ErrCorrupt
		}
		n := int(binary.BigEndian.Uint32(b))
		if n == 0 || n > int(f.Dooms) || len(b) < 4+8*n {
			return File{}, ErrCorrupt
		}
		for i := range n {
			f.Unlinks = append(f.Unlinks, binary.BigEndian.Uint64(b[4+8*i:]))
		}
		b = b[4+8*n:]
	}
	if flags&fileCred == 0 {
		if len(b) != 0 || flags&fileCaps != 0 {
			return File{}, ErrCorrupt
		}
		return f, nil
	}
	if len(b) < 12 {
		return File{}, ErrCorrupt
	}
	c := &ident.Cred{UID: binary.BigEndian.Uint32(b), GID: binary.BigEndian.Uint32(b[4:])}
	n := int(binary.BigEndian.Uint32(b[8:]))
	want := 12 + 4*n
	if flags&fileCaps != 0 {
		want += 8
	}
	if n < 0 || len(b) != want {
		return File{}, ErrCorrupt
	}
	for i := range n {
		c.Groups = append(c.Groups, binary.BigEndian.Uint32(b[12+4*i:]))
	}
	if flags&fileCaps != 0 {
		c.Caps, c.HasCaps = ident.Caps(binary.BigEndian.Uint64(b[12+4*n:]))&ident.FSCaps, true
	}
	f.Cred = c
	return f, nil
}
