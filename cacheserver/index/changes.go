package index

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

var bucketChanges = []byte("changes")

// ChangeKind says what a change record asks the next flush to fsync on the
// backing store.
type ChangeKind byte

const (
	// NamesChanged records a backing directory whose entries calls
	// through the cache changed.
	NamesChanged ChangeKind = 'n'
	// AttrsChanged records a backing file whose inode (size, mode, owner,
	// times) calls through the cache changed.
	AttrsChanged ChangeKind = 'a'
)

// Change names a change record: what changed, and its path.
type Change struct {
	Kind ChangeKind
	Path string
}

// ChangeRecord is the durable state of a change that no fsync on the
// backing store made durable yet: the identity to fsync it as.
type ChangeRecord struct {
	Cred *ident.Cred
}

func encodeChange(c Change) []byte {
	return append([]byte{byte(c.Kind)}, c.Path...)
}

func decodeChange(b []byte) (Change, error) {
	if len(b) == 0 || ChangeKind(b[0]) != NamesChanged && ChangeKind(b[0]) != AttrsChanged {
		return Change{}, fmt.Errorf("change key %q: %w", b, ErrCorrupt)
	}
	return Change{Kind: ChangeKind(b[0]), Path: string(b[1:])}, nil
}

// A change record's value is that of a file record of size 0 that holds
// only the identity, so that one codec reads both.
func encodeChangeRecord(r *ChangeRecord) []byte { return encodeFile(&File{Cred: r.Cred}) }

func decodeChangeRecord(b []byte) (ChangeRecord, error) {
	f, err := decodeFile(b)
	if err != nil {
		return ChangeRecord{}, err
	}
	if f.Size != 0 || f.Dooms != 0 {
		return ChangeRecord{}, ErrCorrupt
	}
	return ChangeRecord{Cred: f.Cred}, nil
}

// LoadChanges calls fn for every change record.
func (d *DB) LoadChanges(fn func(Change, ChangeRecord) error) error {
	return d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketChanges).ForEach(func(k, v []byte) error {
			c, err := decodeChange(k)
			if err != nil {
				return err
			}
			r, err := decodeChangeRecord(v)
			if err != nil {
				return fmt.Errorf("change %q: %w", k, err)
			}
			return fn(c, r)
		})
	})
}

func applyChanges(tx *bolt.Tx, changes map[Change]*ChangeRecord) error {
	b := tx.Bucket(bucketChanges)
	for c, r := range changes {
		if err := putOrDelete(b, encodeChange(c), r, encodeChangeRecord); err != nil {
			return err
		}
	}
	return nil
}
