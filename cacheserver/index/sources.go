package index

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketSources  = []byte("sources")
	bucketVersions = []byte("versions")
)

// Source is the identity of the backing file that a file's cached extents
// were copied from: its inode number, creation time (Unix nanoseconds, 0:
// unknown) and inode generation (0: unknown), and the version of it they
// are of: its change time (Unix nanoseconds, 0: unknown) when they were
// copied. The version goes in a bucket of its own, which a release that
// knows sources but no versions ignores.
type Source struct {
	Ino    uint64
	Birth  int64
	Gen    uint32
	Change int64
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

// LoadSources calls fn for every source record, with its version if the
// index holds one.
func (d *DB) LoadSources(fn func(string, Source) error) error {
	return d.db.View(func(tx *bolt.Tx) error {
		versions := tx.Bucket(bucketVersions)
		return tx.Bucket(bucketSources).ForEach(func(k, v []byte) error {
			s, err := decodeSource(v)
			if err != nil {
				return fmt.Errorf("source of %q: %w", k, err)
			}
			if v := versions.Get(k); v != nil {
				if len(v) != 8 {
					return fmt.Errorf("version of %q: %w", k, ErrCorrupt)
				}
				s.Change = int64(binary.BigEndian.Uint64(v))
			}
			return fn(string(k), s)
		})
	})
}

func applySources(tx *bolt.Tx, sources map[string]*Source) error {
	b, versions := tx.Bucket(bucketSources), tx.Bucket(bucketVersions)
	for p, s := range sources {
		if err := putOrDelete(b, []byte(p), s, encodeSource); err != nil {
			return err
		}
		// No version outlives its source here. One that a release that
		// knows no versions leaves behind is older than the file, if a
		// source comes back: the next release copies the file again.
		var change *int64
		if s != nil && s.Change != 0 {
			change = &s.Change
		}
		if err := putOrDelete(versions, []byte(p), change, encodeVersion); err != nil {
			return err
		}
	}
	return nil
}

func encodeVersion(change *int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(*change)) }
