package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/index"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// Sentinel errors. Callers match them with errors.Is and map them to errno.
var (
	// ErrFileTooLarge (EFBIG): a write or truncate past Tunables.MaxFileSize.
	ErrFileTooLarge = errors.New("file too large")
	// ErrTooManyFiles (EDQUOT): ReserveFile of a file the engine counts
	// (Share) and holds no record of, when the records and reservations it
	// counts reached its share of Tunables.MaxFiles.
	ErrTooManyFiles = errors.New("too many files")
	// ErrReadOnly (EROFS): bytes written to the cache device within the
	// write window passed Multiplier x Capacity; the cache refuses writes
	// (but those marked Accepted), and AdmitWriter opens for writing, until
	// old writes leave the window.
	ErrReadOnly = errors.New("cache is read-only: write window exceeded")
	// ErrCacheDevice (EIO): an fdatasync of the slab failed. The kernel
	// reports a failed write-out once, and may let the pages it could not
	// write fall out of memory as if written, so a later fdatasync that
	// succeeds proves nothing. From then on the engine commits no index
	// change, every Sync fails, and writes fail (but those marked
	// Accepted), while reads and write-back of the dirty data go on; Stats
	// says so. A restart of the engine ends the state.
	ErrCacheDevice = errors.New("cache device failed")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("cache engine closed")
	// ErrDirtyLeft: a flush gave up with dirty data left; the error says
	// how much and wraps the last write-back error.
	ErrDirtyLeft = errors.New("dirty data left after flush")
	// ErrGeometry: the cache directory was made with another extent size or
	// a larger capacity than the configuration asks for.
	ErrGeometry = errors.New("cache directory geometry does not match the configuration")
	// ErrInUse: another process has the cache directory open (index.ErrInUse).
	ErrInUse = index.ErrInUse
	// ErrInvalid: an argument (negative offset or size, bad path, bad
	// configuration) is invalid (EINVAL).
	ErrInvalid = errors.New("invalid argument")
)

// The extent sizes the engine starts with (Config.ExtentSize). The operator
// holds its pools' extentSize to the same range, and each server's capacity
// to at least 2 extents (controllers/policy); change them together.
const (
	MinExtentSize = 4 << 10
	MaxExtentSize = 1 << 30
)

// Durability says what Sync guarantees.
type Durability string

const (
	// Cache makes Sync return once the file's data and the cache index are
	// durable on the cache device.
	Cache Durability = "Cache"
	// Backing makes Sync return once the file's dirty data is written back
	// and fsynced on the backing store, and NamesChanged and AttrsChanged
	// return once the names and inodes they were told of are fsynced there
	// (rule 8 of the package doc). With Cache, Flush, FlushPath and Close
	// make those durable.
	Backing Durability = "Backing"
)

// Clock tells the time. Tests substitute a fake one to move the write window.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// WriteWindow limits the bytes written to the cache device: at most
// Multiplier x Capacity within any sliding Length.
type WriteWindow struct {
	// Multiplier defaults to 10; a negative value disables the limit.
	Multiplier float64
	// Length defaults to 24h.
	Length time.Duration
}

// Tunables are the knobs that can change while the engine runs.
type Tunables struct {
	// WriteBackThreads is the number of write-back workers (default 4).
	WriteBackThreads int
	// DirtyHigh and DirtyLow are percentages of Capacity: write-back starts
	// when dirty extents pass DirtyHigh and stops at DirtyLow (default 50, 25).
	DirtyHigh, DirtyLow int
	// EvictHigh and EvictLow are percentages of Capacity: eviction of clean
	// extents starts past EvictHigh and stops at EvictLow (default 95, 85).
	EvictHigh, EvictLow int
	// MaxFileSize limits the size of a file in bytes; 0 means no limit.
	MaxFileSize int64
	// MaxFiles limits the number of files created or written through the
	// cache that it still holds a record of, over every engine of an
	// instance: each engine counts the files of its Config.Share, up to
	// its part of MaxFiles (Share.Of); 0 means no limit.
	MaxFiles int64
	// WriteWindow limits the bytes written to the cache device.
	WriteWindow WriteWindow
}

// Config configures an Engine.
type Config struct {
	// Dir is the cache directory on the local SSD.
	Dir string
	// Backing is the store the cache is in front of.
	Backing backing.Store
	// ExtentSize is the unit of caching in bytes (default 1 MiB), from
	// MinExtentSize to MaxExtentSize.
	ExtentSize int64
	// Capacity is the cache space in bytes, rounded down to extents. It
	// must hold at least 2 extents.
	Capacity int64
	// Tunables holds the run-time knobs.
	Tunables Tunables
	// Durability says what Sync guarantees (default Cache).
	Durability Durability
	// Share says which files this engine counts against Tunables.MaxFiles
	// and which part of it it may use (default: every file, all of it).
	Share Share
	// Stride is the distance between the extents of a file that this engine
	// serves: N in a cache striped over N servers, where extent e of a file
	// is on one server and e+1 on the next (default 1). Read-ahead copies
	// up the extents this engine will be asked for, not its neighbours'.
	Stride int64
	// CommitInterval bounds how long index changes wait for a commit when
	// nothing asks for one (default one second): it is what a crash of the
	// server can lose of writes that no fsync covered, as a journaling file
	// system's commit interval is.
	CommitInterval time.Duration
	// DoomTimeout is how long an unlink may keep a file doomed (see Doom)
	// before the engine ends the doom by itself, as the backing store says
	// (default two minutes): the client that began the unlink may have
	// died.
	DoomTimeout time.Duration
	// Clock defaults to the system clock.
	Clock Clock
	// FS is the file system of Dir (default vfs.OS).
	FS vfs.FS
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.ExtentSize == 0 {
		c.ExtentSize = 1 << 20
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.FS == nil {
		c.FS = vfs.OS{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Durability == "" {
		c.Durability = Cache
	}
	if c.Stride <= 0 {
		c.Stride = 1
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = time.Second
	}
	if c.DoomTimeout <= 0 {
		c.DoomTimeout = 2 * time.Minute
	}
	c.Tunables = c.Tunables.withDefaults()
	switch {
	case c.Dir == "" || c.Backing == nil:
		return c, fmt.Errorf("%w: Dir and Backing are required", ErrInvalid)
	case c.ExtentSize < MinExtentSize || c.ExtentSize > MaxExtentSize:
		return c, fmt.Errorf("%w: extent size %d is outside %d (4 KiB) to %d (1 GiB) bytes",
			ErrInvalid, c.ExtentSize, MinExtentSize, MaxExtentSize)
	case c.Capacity/c.ExtentSize < 2:
		return c, fmt.Errorf("%w: capacity %d holds fewer than 2 extents of %d bytes: it must be at least %d bytes",
			ErrInvalid, c.Capacity, c.ExtentSize, 2*c.ExtentSize)
	case c.Durability != Cache && c.Durability != Backing:
		return c, fmt.Errorf("%w: durability %q", ErrInvalid, c.Durability)
	}
	return c, nil
}

func (t Tunables) withDefaults() Tunables {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&t.WriteBackThreads, 4)
	def(&t.DirtyHigh, 50)
	def(&t.DirtyLow, 25)
	def(&t.EvictHigh, 95)
	def(&t.EvictLow, 85)
	t.DirtyLow = min(t.DirtyLow, t.DirtyHigh)
	t.EvictLow = min(t.EvictLow, t.EvictHigh)
	if t.WriteWindow.Multiplier == 0 {
		t.WriteWindow.Multiplier = 10
	}
	if t.WriteWindow.Length <= 0 {
		t.WriteWindow.Length = 24 * time.Hour
	}
	return t
}
