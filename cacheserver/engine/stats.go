package engine

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of an engine's counters and state.
type Stats struct {
	Hits, Misses   int64 // extent accesses served from the cache / copied up
	BytesRead      int64 // bytes returned by ReadAt
	BytesWritten   int64 // bytes accepted by WriteAt
	CopyUpBytes    int64 // bytes copied up from the backing store
	WriteBackBytes int64 // bytes written back to the backing store
	Evictions      int64 // clean extents evicted
	CachedBytes    int64 // space of cached extents (slots in use x extent size)
	DirtyBytes     int64 // bytes not yet written back
	Capacity       int64 // cache space in bytes
	DirtyExtents   int64
	// WindowBytes are the bytes written to the cache device (writes and
	// copy-ups) within the write window; past WindowLimit (-1: no limit)
	// the cache is ReadOnly.
	WindowBytes, WindowLimit int64
	ReadOnly                 bool
	// WriteBackLag is the age of the oldest dirty data.
	WriteBackLag time.Duration
	// Files is the number of files with cached data or a file record.
	Files int64
	// WriteBackErrors counts failed write-backs; LastWriteBackError is the
	// text of the latest one.
	WriteBackErrors    int64
	LastWriteBackError string
	// WriteBackFailing is set while write-back keeps failing: the last
	// flushGiveUp write-backs or more failed, and none succeeded since.
	// WriteBackRefused is set too when the backing store refuses the
	// data (full, over quota, read-only): writers that need space fail
	// then, with its error.
	WriteBackFailing, WriteBackRefused bool
	// DeviceError is the failure of the cache device that stopped writes
	// and commits (ErrCacheDevice), empty while the device works.
	DeviceError string
	// IndexError is why the latest commit of the index failed, empty once
	// one succeeds again (and when DeviceError says why). While commits
	// fail, Sync fails, and freed slots stay unusable, so writers that need
	// space fail with the error; IndexCommitFailures counts the failed
	// commits.
	IndexError          string
	IndexCommitFailures int64
	// PinnedSlots counts the slots that readers of ReadSpans hold.
	PinnedSlots int64
	// DoomedFiles counts the files an unlink holds doomed (see Doom):
	// their dirty data waits for the unlink to end.
	DoomedFiles int64
	// CopyUps counts the extents copied up from the backing store, and
	// CopyUpTime is the time those copies took; WriteBacks and
	// WriteBackTime are the same for the writes of write-back. Failed
	// attempts count in neither. Their ratio is the backing store's
	// latency as the cache sees it: where a job's first reads or its
	// teardown are slow, it tells the parallel file system apart from the
	// cache.
	CopyUps, WriteBacks       int64
	CopyUpTime, WriteBackTime time.Duration
	// ReplacedFiles counts the files whose clean extents a read dropped
	// because it named a backing file that replaced, on the backing
	// store, the one they were copied from, or a later version of it
	// (see ReadingFile).
	ReplacedFiles int64
}

// opTimes counts operations on the backing store that succeeded, and the
// time they took. It is updated without Engine.mu.
type opTimes struct{ n, nanos atomic.Int64 }

func (t *opTimes) add(d time.Duration) {
	t.n.Add(1)
	t.nanos.Add(int64(d))
}

// counters are the monotonic parts of Stats, guarded by Engine.mu.
type counters struct {
	hits, misses, bytesRead, bytesWritten  int64
	copyUp, writeBack, evictions, wbErrors int64
	replaced                               int64 // files dropped for a replaced backing file
	yields                                 int64 // write-back pauses for jobs' I/O
	syncYields                             int64 // syncer pauses for jobs' I/O
	syncYieldsCut                          int64 // of those, ended by an urgent flush
	commitFailures                         int64
	lastWBErr                              error
}

// Stats returns a snapshot of the engine's statistics.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.cfg.Clock.Now()
	s := Stats{
		Hits: e.st.hits, Misses: e.st.misses, BytesRead: e.st.bytesRead, BytesWritten: e.st.bytesWritten,
		CopyUpBytes: e.st.copyUp, WriteBackBytes: e.st.writeBack, Evictions: e.st.evictions, ReplacedFiles: e.st.replaced,
		CachedBytes: e.used * e.es, DirtyBytes: e.dirtyBytes, Capacity: e.slab.Slots() * e.es,
		DirtyExtents: int64(e.dirty.n), WindowBytes: e.window.sum(now), WindowLimit: e.windowLimitLocked(),
		ReadOnly: e.readOnlyLocked(), WriteBackErrors: e.st.wbErrors, PinnedSlots: int64(len(e.pins)),
		DoomedFiles: int64(len(e.dooms)), IndexCommitFailures: e.st.commitFailures,
		CopyUps: e.copyUpTimes.n.Load(), CopyUpTime: time.Duration(e.copyUpTimes.nanos.Load()),
		WriteBacks: e.writeBackTimes.n.Load(), WriteBackTime: time.Duration(e.writeBackTimes.nanos.Load()),
	}
	if e.st.lastWBErr != nil {
		s.LastWriteBackError = e.st.lastWBErr.Error()
	}
	s.WriteBackFailing = e.failStreak >= flushGiveUp
	s.WriteBackRefused = s.WriteBackFailing && refused(e.st.lastWBErr)
	if e.deviceErr != nil {
		s.DeviceError = e.deviceErr.Error()
	} else if e.commitErr != nil {
		s.IndexError = e.commitErr.Error()
	}
	for x := e.dirty.head; x != nil; x = x.next {
		s.WriteBackLag = max(s.WriteBackLag, now.Sub(x.dirtySince))
	}
	for _, f := range e.files {
		if f.record || len(f.extents) > 0 {
			s.Files++
		}
	}
	return s
}

// SetTunables changes the knobs of a running engine.
func (e *Engine) SetTunables(t Tunables) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tun = t.withDefaults()
	e.window.length = e.tun.WriteWindow.Length
	e.startWorkersLocked()
	e.cond.Broadcast()
}
