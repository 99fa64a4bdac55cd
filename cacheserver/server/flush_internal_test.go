package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// slowFlush is a cache whose Flush writes back a byte every few
// milliseconds until nothing is dirty.
type slowFlush struct {
	Cache
	dirty atomic.Int64
}

func (c *slowFlush) Flush(ctx context.Context) error {
	for c.dirty.Load() > 0 {
		time.Sleep(5 * time.Millisecond)
		c.dirty.Add(-1)
	}
	return nil
}

func (c *slowFlush) Stats() control.Stats { return control.Stats{DirtyBytes: c.dirty.Load()} }

// lockedBuffer is a bytes.Buffer that goroutines may log to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestFlushLogsProgress flushes a cache that takes several progress
// intervals to write back: the log shows the dirty bytes going down while
// it runs, and nothing once it returned.
func TestFlushLogsProgress(t *testing.T) {
	defer func(d time.Duration) { flushProgressEvery = d }(flushProgressEvery)
	flushProgressEvery = 50 * time.Millisecond
	var logs lockedBuffer
	c := &slowFlush{}
	c.dirty.Store(60)
	s, err := New(Config{Cache: c, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if left, err := s.Flush(context.Background()); left != 0 || err != nil {
		t.Fatalf("Flush = %d, %v; want 0 bytes left", left, err)
	}
	after := logs.String()
	if n := strings.Count(after, `msg=Flushing dirtyBytes=`); n < 2 {
		t.Errorf("a flush of at least 300ms logged its progress %d times, want at least 2:\n%s", n, after)
	}
	time.Sleep(3 * flushProgressEvery)
	if got := logs.String(); got != after {
		t.Errorf("the flush logged progress after it returned:\n%s", got[len(after):])
	}
}
