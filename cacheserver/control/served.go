package control

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/durable"
)

// servedLog records, in a file that outlives the server process, the
// calls that change something that the server served, so that the next
// process of the server refuses them too. Without it, a call seen on the
// network shortly before a restart could be sent again to the new process,
// which knew nothing of it: a discard, once the server came back, would
// drop the dirty data that the teardown had since written back or kept.
// The window is wider than startSlack for a caller whose clock runs
// ahead of the server's: its call carries a time up to maxSkew ahead.
//
// The log must not need new room on its disk while the server runs: the
// cache disk fills with the cache's own data, and a log that could not
// record a teardown's drain or discard would stall the teardown until
// others made room. So the file is written whole when it is made, with
// room for servedSlots calls, and a call is recorded in place, in a slot
// that holds no call worth remembering (none, or one more than maxSkew
// old, which no server serves). Opening the log reads the file as it is.
//
// The file is records of servedRecordSize bytes: a header that names the
// format, then slots. A slot holds spaces and a newline, or the record of
// a call (see encodeServed): "<unix seconds, 20 digits> <nonce>\n" and
// "#<CRC-32C of that line, 8 hex digits>\n". A call's record is written
// and fsynced before the call is served: a crash before the sync is a
// crash before the call did anything, and a record that it cut short
// fails its checksum and reads as no call. The slot it was written over
// held no call worth remembering, so no crash loses one. A server of the
// earlier release, which appended a line per call, reads the first line
// of each record as its own; this one makes such a file anew in this
// format when it opens it.
//
// When every slot holds a call of the last minutes, the file grows,
// doubling, to at most servedMaxSlots; a call that finds no slot and no
// room to grow is not served (errServedFull) rather than forgotten.
//
// Calls that change nothing (GET, which only stats is) are not recorded:
// the operator asks every server for its stats every few seconds, an fsync
// each, and an answer sent again to a call that an eavesdropper saw
// already tells them nothing new and binds nobody (the signature of an
// answer covers the call's nonce, which its caller got its answer to).
type servedLog struct {
	mu    sync.Mutex
	f     servedFile
	slots []callID // the call in each slot of the file; zero for none
	next  int      // the slot to try first for the next call
	max   int      // the most slots the file may grow to
}

// servedFile is the open file of a servedLog. Implementations must
// make what WriteAt wrote durable in Sync, as *os.File does; a test gives
// one that a crash cuts short.
type servedFile interface {
	io.WriterAt
	Sync() error
	Close() error
}

// servedSlots is how many calls a new file has room for: a call every
// 150 ms for the ten minutes that a call may have to be remembered (see
// servedLog.holds), which is more than the operator and the command line
// make. With the header, the file is 256 KiB.
const servedSlots = 1<<12 - 1

// servedMaxSlots is the most calls the file grows to hold: 4 MiB.
const servedMaxSlots = 1<<16 - 1

// errServedFull: every slot of the file of calls served holds a call that
// must be remembered, and the file could not grow.
var errServedFull = errors.New("the file of control calls served is full")

// openServedLog opens the log at path, making it if needed.
func openServedLog(path string, now time.Time) (*servedLog, error) {
	return openServedLogSized(path, now, servedSlots, servedMaxSlots)
}

// openServedLogSized opens the log at path, making it with room for slots
// calls if needed, and lets it grow to maxSlots.
func openServedLogSized(path string, now time.Time, slots, maxSlots int) (*servedLog, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the control calls served: %w", err)
	}
	l := &servedLog{max: maxSlots}
	found, ok := readSlots(data)
	if !ok {
		calls := slices.DeleteFunc(readLines(data), func(id callID) bool { return !holds(id, now) })
		if found, err = makeServedFile(path, calls, slots); err != nil {
			return nil, err
		}
	}
	for i, id := range found {
		if !holds(id, now) {
			found[i] = callID{}
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the control calls served: %w", err)
	}
	l.f, l.slots = f, found
	return l, nil
}

// makeServedFile writes at path a file of this format with room for slots
// calls, calls first, and returns its slots. It replaces the file
// atomically: a crash leaves the old one or the new one, and either holds
// every call worth remembering.
func makeServedFile(path string, calls []callID, slots int) ([]callID, error) {
	data, n, err := newServedFile(calls, slots)
	if err != nil {
		return nil, fmt.Errorf("writing the control calls served: %w", err)
	}
	// Durable step: the new file, whole. A crash before it finds the old
	// one, or none, if the server never served a call.
	if err := durable.WriteFile(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("writing the control calls served: %w", err)
	}
	found := make([]callID, n)
	copy(found, calls)
	return found, nil
}

// holds says whether a slot that holds id holds a call worth remembering
// at now: one that a server might still serve.
func holds(id callID, now time.Time) bool {
	return id != callID{} && now.Sub(time.Unix(id.ts, 0)) <= maxSkew
}

// served returns the calls of the log, nonce to time.
func (l *servedLog) served() map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	calls := map[string]time.Time{}
	for _, id := range l.slots {
		if id != (callID{}) {
			calls[id.nonce] = time.Unix(id.ts, 0)
		}
	}
	return calls
}

// record adds id to the log, durably, before its call is served.
func (l *servedLog) record(id callID, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, err := encodeServed(id)
	if err != nil {
		return fmt.Errorf("recording a control call: %w", err)
	}
	i, err := l.freeSlot(now)
	if err != nil {
		return fmt.Errorf("recording a control call: %w", err)
	}
	if err := l.write(rec, slotOffset(i)); err != nil {
		return fmt.Errorf("recording a control call: %w", err)
	}
	// Durable step: the record of the call, over a slot that held none
	// worth remembering. A crash before it is a crash before the call
	// was served, and the record it cut short reads as no call.
	l.slots[i], l.next = id, i+1
	return nil
}

// freeSlot returns a slot that holds no call worth remembering at now,
// growing the file when there is none.
func (l *servedLog) freeSlot(now time.Time) (int, error) {
	n := len(l.slots)
	for k := range n {
		if i := (l.next + k) % n; !holds(l.slots[i], now) {
			return i, nil
		}
	}
	if err := l.grow(); err != nil {
		return 0, fmt.Errorf("%w: its %d slots hold the calls of the last %v, and it cannot grow: %w", errServedFull, n, 2*maxSkew, err)
	}
	return n, nil
}

// grow doubles the slots of the file, up to l.max.
func (l *servedLog) grow() error {
	n := len(l.slots)
	more := min(2*n+1, l.max) - n
	if more <= 0 {
		return fmt.Errorf("it holds the most, %d", l.max)
	}
	// Durable step: the new free slots, past the end of the file. A crash
	// before it leaves the file as it was, or longer by free or zero
	// bytes, which hold no call.
	if err := l.write(bytes.Repeat(servedFree, more), slotOffset(n)); err != nil {
		return err
	}
	l.slots = append(l.slots, make([]callID, more)...)
	return nil
}

// write writes p at off in the file and makes it durable.
func (l *servedLog) write(p []byte, off int64) error {
	if l.f == nil {
		return os.ErrClosed
	}
	if _, err := l.f.WriteAt(p, off); err != nil {
		return err
	}
	return l.f.Sync()
}

// close closes the log.
func (l *servedLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
