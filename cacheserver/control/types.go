package control

import (
	"fmt"
	"syscall"
	"time"
)

// ServerInfo describes a cache server.
type ServerInfo struct {
	// Instance names the cache instance the server belongs to.
	Instance string `json:"instance"`
	// Index is the server's place among Servers servers.
	Index   int `json:"index"`
	Servers int `json:"servers"`
	// ExtentSize is the striping unit in bytes.
	ExtentSize int64 `json:"extentSize"`
	// DataAddress is the address of the data-path protocol.
	DataAddress string `json:"dataAddress"`
	// Backing is the backing directory as the server sees it.
	Backing string `json:"backing"`
	// AccessMode is Striped (extents spread over the servers) or
	// LoadBalanced (read-only; every server serves whole files).
	AccessMode string `json:"accessMode"`
	// Durability is Cache or Backing: where fsync makes data durable.
	Durability string `json:"durability"`
	// Draining is true once Drain was called: writes fail with EROFS.
	Draining bool `json:"draining"`
	// ActAsCaller is true when backing-store operations run as the caller.
	ActAsCaller bool `json:"actAsCaller"`
}

// Stats is what a server reports about its cache.
type Stats struct {
	Server ServerInfo `json:"server"`
	// CapacityBytes is the size of the cache.
	CapacityBytes int64 `json:"capacityBytes"`
	// CachedBytes is the data the cache holds, clean or dirty.
	CachedBytes int64 `json:"cachedBytes"`
	// DirtyBytes is the data not yet written back.
	DirtyBytes int64 `json:"dirtyBytes"`
	// Hits and Misses count extent reads served from the cache and copied
	// up from the backing store.
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	// CopyUpBytes and WriteBackBytes count bytes read from and written to
	// the backing store.
	CopyUpBytes    int64 `json:"copyUpBytes"`
	WriteBackBytes int64 `json:"writeBackBytes"`
	// CopyUps counts the extents copied up from the backing store and
	// CopyUpSeconds the time those copies took in total; WriteBacks and
	// WriteBackSeconds are the same for the writes of write-back. Failed
	// attempts count in neither. Sum over count is the backing store's
	// latency as the cache sees it.
	CopyUps          uint64  `json:"copyUps"`
	CopyUpSeconds    float64 `json:"copyUpSeconds"`
	WriteBacks       uint64  `json:"writeBacks"`
	WriteBackSeconds float64 `json:"writeBackSeconds"`
	// WriteBackLagSeconds is the age of the oldest dirty data.
	WriteBackLagSeconds float64 `json:"writeBackLagSeconds"`
	// BytesRead and BytesWritten count bytes served to and accepted from
	// clients.
	BytesRead    int64 `json:"bytesRead"`
	BytesWritten int64 `json:"bytesWritten"`
	// Evictions counts clean extents dropped to make room.
	Evictions int64 `json:"evictions"`
	// WindowBytesWritten is what was written to the cache device (writes
	// and copy-ups) within the current write window; WindowLimitBytes is
	// what the window allows, -1 when it is unlimited. ReadOnly is true
	// once the window is used up: writes then fail with EROFS.
	WindowBytesWritten int64 `json:"windowBytesWritten"`
	WindowLimitBytes   int64 `json:"windowLimitBytes"`
	ReadOnly           bool  `json:"readOnly"`
	// CacheDeviceError says why the server's cache device failed (an
	// fdatasync of it returned an error): the server then refuses writes
	// (EIO) and makes nothing durable on the device, while it still serves
	// reads and writes back what is dirty. Empty while the device works.
	CacheDeviceError string `json:"cacheDeviceError,omitempty"`
	// IndexError says why the server's latest commit of its index failed,
	// such as a full cache disk (the slab has its space from the start,
	// the index grows with the files it records); empty once one succeeds.
	// Meanwhile fsync fails, and so do writes that need cache space freed
	// since (ENOSPC for a full disk); nothing is lost, and the server
	// retries every second. IndexCommitFailures counts the failed commits.
	IndexError          string `json:"indexError,omitempty"`
	IndexCommitFailures uint64 `json:"indexCommitFailures"`
	// Flushes counts the whole-cache flushes (Flush and Drain) that ended,
	// and FlushSeconds the time they took in total.
	Flushes      uint64  `json:"flushes"`
	FlushSeconds float64 `json:"flushSeconds"`
	// PreloadBytesDone and PreloadBytesTotal are the progress of the
	// preloads running on the server, summed over them: the bytes they
	// have copied up (or found cached already) and the bytes they copy up
	// in all, known once each has walked its tree. Both are zero when no
	// preload runs.
	PreloadBytesDone  int64 `json:"preloadBytesDone"`
	PreloadBytesTotal int64 `json:"preloadBytesTotal"`
	// Files is the number of files with cached data.
	Files int64 `json:"files"`
	// WriteBackErrors counts failed write-backs; LastWriteBackError says
	// why the latest one failed.
	WriteBackErrors    uint64 `json:"writeBackErrors"`
	LastWriteBackError string `json:"lastWriteBackError,omitempty"`
	// WriteBackFailing is true while write-back keeps failing (several
	// times in a row, with no success since); WriteBackRefused too when
	// the backing file system refuses the data (full, over quota,
	// read-only): writes that need cache space held by dirty data then
	// fail with its error, and reads of data not cached go to it directly.
	WriteBackFailing bool `json:"writeBackFailing,omitempty"`
	WriteBackRefused bool `json:"writeBackRefused,omitempty"`
	// DoomedFiles counts the files an unlink under way holds: their dirty
	// data is neither written back nor dropped until it ends, or, when
	// the client that began it is gone, until the server ends it after
	// two minutes.
	DoomedFiles int64 `json:"doomedFiles"`
	// ReplacedFiles counts the files whose cached data a read dropped
	// because the file it opened had replaced, on the backing store, the
	// one the data came from, or had been changed in place since.
	ReplacedFiles uint64 `json:"replacedFiles,omitempty"`
	// HiddenNames counts the files that mounts unlinked while they had
	// them open, and whose hidden names in the backing store the server
	// removes at the teardown unless the mounts remove them first (see
	// RemoveHidden).
	HiddenNames int64 `json:"hiddenNames"`
	// RefusedConnections counts data-path connections the server closed
	// because the peer did not prove the shared secret or sent a request
	// its connection did not tag; RefusedControlCalls, control calls it
	// refused (unsigned, signed with another secret, replayed, or with a
	// time too far from its clock). Either growing means a peer without
	// the secret, or with a clock that is off, tries to use the server.
	RefusedConnections  uint64 `json:"refusedConnections"`
	RefusedControlCalls uint64 `json:"refusedControlCalls"`
}

// HitRatio returns Hits / (Hits + Misses), or 0 before any read.
func (s Stats) HitRatio() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// CopyUpLatency is the mean time one extent took to copy up from the
// backing store; ok is false when none was timed.
func (s Stats) CopyUpLatency() (d time.Duration, ok bool) { return mean(s.CopyUpSeconds, s.CopyUps) }

// WriteBackLatency is the mean time one extent took to write back to the
// backing store; ok is false when none was timed.
func (s Stats) WriteBackLatency() (d time.Duration, ok bool) {
	return mean(s.WriteBackSeconds, s.WriteBacks)
}

func mean(seconds float64, n uint64) (time.Duration, bool) {
	if n == 0 {
		return 0, false
	}
	return time.Duration(seconds / float64(n) * float64(time.Second)), true
}

// FormatLatency formats a latency for people, in milliseconds with two
// decimals, such as "4.21ms".
func FormatLatency(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// FlushResult is the answer to Flush and Drain.
type FlushResult struct {
	// RemainingBytes is the dirty data left when the call returned: 0 after
	// a complete flush.
	RemainingBytes int64 `json:"remainingBytes"`
	// Error says why the flush could not finish; empty on success.
	Error string `json:"error,omitempty"`
}

// HiddenResult is the answer to RemoveHidden.
type HiddenResult struct {
	// Removed is how many hidden names the server removed, or gave back
	// (GivenBack).
	Removed int `json:"removed"`
	// GivenBack are the files hidden for renames over them that failed
	// (a server crashed, and the mount ended before it could give them
	// their names back), which the server gave their names back rather
	// than remove them.
	GivenBack []GivenBack `json:"givenBack,omitempty"`
}

// GivenBack is a file hidden for a rename over it that failed, given its
// name back at teardown.
type GivenBack struct {
	// Path is the name the file had.
	Path Path `json:"path"`
	// As is the name it has now: Path, or a name beside it when another
	// file took Path meanwhile (namespace.KeptInfix).
	As Path `json:"as"`
}

// PreloadResult is the answer to Preload.
type PreloadResult struct {
	// Bytes is how many bytes of the path the server holds, all of them
	// now in its cache: the server's share of the path's extents.
	Bytes int64 `json:"bytes"`
}

// PathRequest names a path relative to the root of the backing store, byte
// for byte (see Path).
type PathRequest struct {
	Path Path `json:"path"`
}

// Tunables are the knobs that may change while a server runs; nil fields
// stay as they are, and zero sets the server's default (no limit for
// MaxFileSize and MaxFiles), so that a knob taken out of a spec goes back
// to what a server started without it has. Watermarks are percentages of
// the capacity.
type Tunables struct {
	DirtyHighWatermarkPercent *int   `json:"dirtyHighWatermarkPercent,omitempty"`
	DirtyLowWatermarkPercent  *int   `json:"dirtyLowWatermarkPercent,omitempty"`
	EvictHighWatermarkPercent *int   `json:"evictHighWatermarkPercent,omitempty"`
	EvictLowWatermarkPercent  *int   `json:"evictLowWatermarkPercent,omitempty"`
	WriteBackThreads          *int   `json:"writeBackThreads,omitempty"`
	MaxFileSize               *int64 `json:"maxFileSize,omitempty"`
	MaxFiles                  *int64 `json:"maxFiles,omitempty"`
	// WriteWindowMultiplier times the capacity may be written within
	// WriteWindowSeconds; past it writes fail with EROFS.
	WriteWindowMultiplier *float64 `json:"writeWindowMultiplier,omitempty"`
	WriteWindowSeconds    *int64   `json:"writeWindowSeconds,omitempty"`
}

// ErrorBody is the body of a failed call.
type ErrorBody struct {
	Error string `json:"error"`
	// Errno is the errno of the failure, 0 if it has none.
	Errno int `json:"errno,omitempty"`
	// RemainingBytes is set by a flush or drain that could not finish.
	RemainingBytes int64 `json:"remainingBytes,omitempty"`
	// Removed and GivenBack are set by a RemoveHidden that removed some
	// names but not all.
	Removed   int         `json:"removed,omitempty"`
	GivenBack []GivenBack `json:"givenBack,omitempty"`
}

// Error is a failed control call as the Client returns it.
type Error struct {
	// Op is the call that failed, such as "flush".
	Op string
	// Status is the HTTP status.
	Status int
	Body   ErrorBody
}

// Error describes the failed call.
func (e *Error) Error() string {
	return fmt.Sprintf("control %s: %s (HTTP %d)", e.Op, e.Body.Error, e.Status)
}

// Unwrap returns the errno of the failure, so that errors.Is(err,
// syscall.ENOENT) works, or ErrFlushIncomplete for a flush that left dirty
// data.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Body.Errno != 0 {
		errs = append(errs, syscall.Errno(e.Body.Errno))
	}
	if e.Body.RemainingBytes > 0 {
		errs = append(errs, ErrFlushIncomplete)
	}
	return errs
}

// ErrFlushIncomplete is matched by the error of a Flush or Drain that
// returned with dirty data left.
var ErrFlushIncomplete = fmt.Errorf("flush left dirty data behind")
