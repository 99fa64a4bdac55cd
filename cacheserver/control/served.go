package control

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"strconv"
	"strings"
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
// The log has a line per call, "<unix seconds> <nonce>", appended and
// fsynced before the call is served: a crash before the sync is a crash
// before the call did anything. A torn last line belongs to such a call,
// and is dropped. A call is worth remembering until it is too old for any
// server to serve (maxSkew past its time); opening the log keeps those
// calls alone, and so does an append once the log holds servedRewriteAt
// lines more than when it was last written.
//
// Calls that change nothing (GET, which only stats is) are not recorded:
// the operator asks every server for its stats every few seconds, an fsync
// each, and an answer sent again to a call that an eavesdropper saw
// already tells them nothing new and binds nobody (the signature of an
// answer covers the call's nonce, which its caller got its answer to).
type servedLog struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	calls map[string]time.Time // nonce -> time of the call
	lines int                  // lines appended since the log was written
}

// servedRewriteAt is how many appended lines make an append write the log
// anew with the calls still worth remembering.
const servedRewriteAt = 1024

// openServedLog reads the log at path, creating it if needed, and writes
// it anew with the calls of it that are not too old at now.
func openServedLog(path string, now time.Time) (*servedLog, error) {
	l := &servedLog{path: path, calls: map[string]time.Time{}}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the control calls served: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if id, ok := parseServed(sc.Text()); ok {
			l.calls[id.nonce] = time.Unix(id.ts, 0)
		}
	}
	if err := l.rewrite(now); err != nil {
		return nil, err
	}
	return l, nil
}

// parseServed reads a line of the log; a torn one is not a call.
func parseServed(line string) (callID, bool) {
	ts, nonce, ok := strings.Cut(line, " ")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || len(nonce) != 32 {
		return callID{}, false
	}
	return callID{ts: n, nonce: nonce}, true
}

// served returns the calls of the log, nonce to time.
func (l *servedLog) served() map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.calls)
}

// record adds id to the log, durably, before its call is served.
func (l *servedLog) record(id callID, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[id.nonce] = time.Unix(id.ts, 0)
	if l.lines >= servedRewriteAt {
		return l.rewrite(now)
	}
	if _, err := fmt.Fprintf(l.f, "%d %s\n", id.ts, id.nonce); err != nil {
		return fmt.Errorf("recording a control call: %w", err)
	}
	l.lines++
	// Durable step: the record of the call. A crash before it is a crash
	// before the call was served.
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("recording a control call: %w", err)
	}
	return nil
}

// rewrite replaces the log with the calls not too old at now, atomically:
// a crash leaves the old log or the new one, and either holds every call
// worth remembering.
func (l *servedLog) rewrite(now time.Time) error {
	var buf bytes.Buffer
	for nonce, at := range l.calls {
		if now.Sub(at) > maxSkew {
			delete(l.calls, nonce)
			continue
		}
		fmt.Fprintf(&buf, "%d %s\n", at.Unix(), nonce)
	}
	// Durable step: the new log. A crash before it finds the old one,
	// which holds the same calls and more.
	if err := durable.WriteFile(l.path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing the control calls served: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening the control calls served: %w", err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.lines = f, 0
	return nil
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
