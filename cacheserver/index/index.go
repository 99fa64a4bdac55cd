package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// ErrCorrupt is returned when a record of the index cannot be decoded.
var ErrCorrupt = errors.New("corrupt index record")

// ErrInUse is returned when another process holds the index open: two
// engines over one cache directory would overwrite each other's slots.
var ErrInUse = errors.New("the cache directory is in use by another process")

// lockWait is how long Open waits for another process to let go of the
// index: a server that is stopping finishes the requests under way first.
const lockWait = 15 * time.Second

const version = 1

var (
	bucketMeta    = []byte("meta")
	bucketExtents = []byte("extents")
	bucketFiles   = []byte("files")
)

// Key names an extent: extent Index of the file at Path.
type Key struct {
	Path  string
	Index int64
}

// Extent is the durable state of one cached extent.
type Extent struct {
	Slot             uint32
	Valid            uint32
	DirtyLo, DirtyHi uint32
	LastWrite        int64
}

// File is the durable state of one file.
type File struct {
	Size int64
	Cred *ident.Cred
	// Dooms counts the unlinks of the file that were under way: its dirty
	// data is neither written back nor given up until they end.
	Dooms uint32
	// DoomedIno, DoomedBirth and DoomedGen are the inode number, creation
	// time (Unix nanoseconds) and inode generation the backing file had
	// when the first of those unlinks began (0: unknown), so that a file
	// created since under the same name is not taken for it.
	DoomedIno   uint64
	DoomedBirth int64
	DoomedGen   uint32
	// Unlinks are the ids that unlinks under way gave their dooms, so that
	// each can end its own once, even across a restart; at most Dooms of
	// them (a record without them has anonymous dooms).
	Unlinks []uint64
}

// Meta is the geometry of the slab the index refers to.
type Meta struct {
	ExtentSize int64
	Slots      int64
}

// Batch is one atomic set of changes: a nil value deletes the record.
type Batch struct {
	Extents map[Key]*Extent
	Files   map[string]*File
	Changes map[Change]*ChangeRecord
	Sources map[string]*Source
}

// DB is an open index.
type DB struct {
	db *bolt.DB
	fs vfs.FS
}

// Open opens or creates the index at path. Commits run through fsys.Durable.
func Open(path string, fsys vfs.FS) (*DB, error) {
	return open(path, fsys, lockWait)
}

func open(path string, fsys vfs.FS, wait time.Duration) (*DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: wait, NoFreelistSync: true})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: its index %s stayed locked for %s", ErrInUse, path, wait)
	}
	if err != nil {
		return nil, fmt.Errorf("opening index %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketExtents, bucketFiles, bucketChanges, bucketSources, bucketVersions} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("initialising index %s: %w", path, err), db.Close())
	}
	return &DB{db: db, fs: fsys}, nil
}

// Close closes the index.
func (d *DB) Close() error { return d.db.Close() }

// Meta returns the stored geometry; ok is false for a new index.
func (d *DB) Meta() (m Meta, ok bool, err error) {
	err = d.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta)
		es, sl := b.Get([]byte("extentSize")), b.Get([]byte("slots"))
		if es == nil || sl == nil {
			return nil
		}
		ok = true
		m = Meta{ExtentSize: int64(binary.BigEndian.Uint64(es)), Slots: int64(binary.BigEndian.Uint64(sl))}
		return nil
	})
	return m, ok, err
}

// SetMeta stores the geometry.
//
// Durable step: a crash before it leaves a new, empty index, which the next
// Open initialises again.
func (d *DB) SetMeta(m Meta) error {
	return d.fs.Durable("index meta", func() error {
		return d.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketMeta)
			return errors.Join(
				b.Put([]byte("version"), binary.BigEndian.AppendUint32(nil, version)),
				b.Put([]byte("extentSize"), binary.BigEndian.AppendUint64(nil, uint64(m.ExtentSize))),
				b.Put([]byte("slots"), binary.BigEndian.AppendUint64(nil, uint64(m.Slots))))
		})
	})
}

// Incarnation returns the incarnation stored by SetIncarnation, and whether
// it was stored clean; zero and false for an index that has none.
func (d *DB) Incarnation() (inc uint64, clean bool, err error) {
	err = d.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get([]byte("incarnation"))
		if len(v) != 9 {
			return nil
		}
		inc, clean = binary.BigEndian.Uint64(v), v[8] == 1
		return nil
	})
	return inc, clean, err
}

// SetIncarnation stores inc, the number that names a run of the cache in
// which nothing acknowledged was lost, and whether the run ended cleanly
// (everything acknowledged is in the index).
//
// Durable step: a crash before it leaves the incarnation stored before.
func (d *DB) SetIncarnation(inc uint64, clean bool) error {
	v := binary.BigEndian.AppendUint64(nil, inc)
	if clean {
		v = append(v, 1)
	} else {
		v = append(v, 0)
	}
	return d.fs.Durable("index incarnation", func() error {
		return d.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put([]byte("incarnation"), v)
		})
	})
}

// Commit applies b atomically and durably.
//
// Durable step: bbolt writes the new pages, fsyncs, then writes and fsyncs
// its meta page. A crash anywhere before the meta page is durable leaves the
// index as of the previous commit; after it, the whole batch is there.
func (d *DB) Commit(b Batch) error {
	return d.fs.Durable("index commit", func() error {
		return d.db.Update(func(tx *bolt.Tx) error { return apply(tx, b) })
	})
}

func apply(tx *bolt.Tx, b Batch) error {
	eb, fb := tx.Bucket(bucketExtents), tx.Bucket(bucketFiles)
	for k, v := range b.Extents {
		if err := putOrDelete(eb, encodeKey(k), v, encodeExtent); err != nil {
			return err
		}
	}
	for p, v := range b.Files {
		if err := putOrDelete(fb, []byte(p), v, encodeFile); err != nil {
			return err
		}
	}
	return errors.Join(applyChanges(tx, b.Changes), applySources(tx, b.Sources))
}

func putOrDelete[T any](b *bolt.Bucket, key []byte, v *T, enc func(*T) []byte) error {
	if v == nil {
		return b.Delete(key)
	}
	return b.Put(key, enc(v))
}

// Load calls onFile for every file record and onExtent for every extent.
func (d *DB) Load(onFile func(string, File) error, onExtent func(Key, Extent) error) error {
	return d.db.View(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketFiles).ForEach(func(k, v []byte) error {
			f, err := decodeFile(v)
			if err != nil {
				return fmt.Errorf("file %q: %w", k, err)
			}
			return onFile(string(k), f)
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketExtents).ForEach(func(k, v []byte) error {
			key, err := decodeKey(k)
			if err != nil {
				return err
			}
			e, err := decodeExtent(v)
			if err != nil {
				return fmt.Errorf("extent %v: %w", key, err)
			}
			return onExtent(key, e)
		})
	})
}
