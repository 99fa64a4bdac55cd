package index

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var bucketSources = []byte("sources")

// Source is the identity of the backing file that a file's cached extents
// were copied from: its inode number, creation time (Unix nanoseconds, 0:
// unknown) and inode generation (0: unknown).
type Source struct {
	Ino   uint64
	Birth int64
	Gen   uint32
}

func encodeSource(s *Source) []byte {
	b := binary.BigEndian.AppendUint64(nil, s.Ino)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Birth))
	return binary.BigEndian.AppendUint32(b, s.Gen)
}

func decodeSource(b []byte) (Source, error) {
	if len(b) != 20 {
		return Source{}, ErrCorrupt
	}
	return Source{Ino: binary.BigEndian.Uint64(b), Birth: int64(binary.BigEndian.Uint64(b[8:])),
		Gen: binary.BigEndian.Uint32(b[16:])}, nil
}

// LoadSources calls fn for every source record.
func (d *DB) LoadSources(fn func(string, Source) error) error {
	return d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSources).ForEach(func(k, v []byte) error {
			s, err := decodeSource(v)
			if err != nil {
				return fmt.Errorf("source of %q: %w", k, err)
			}
			return fn(string(k), s)
		})
	})
}

func applySources(tx *bolt.Tx, sources map[string]*Source) error {
	b := tx.Bucket(bucketSources)
	for p, s := range sources {
		if err := putOrDelete(b, []byte(p), s, encodeSource); err != nil {
			return err
		}
	}
	return nil
}
