package engine

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// forgetful is a backing store that loses, when its node crashes, every
// change to a file's data that no fsync of the file covered, as a local or
// parallel file system does with the dirty pages of its clients. Creating,
// removing and renaming files count as durable at once.
type forgetful struct {
	backing.Store
	root string

	mu sync.Mutex
	// durable holds, for each file changed since its last fsync, its
	// content before the change; nil for a file that did not exist.
	durable map[string][]byte
}

func (s *forgetful) changing(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.durable[p]; ok {
		return
	}
	b, err := os.ReadFile(filepath.Join(s.root, p))
	if err != nil {
		b = nil
	}
	s.durable[p] = b
}

func (s *forgetful) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	s.changing(p)
	return s.Store.WriteAt(ctx, p, b, off)
}

func (s *forgetful) Truncate(ctx context.Context, p string, size int64) error {
	s.changing(p)
	return s.Store.Truncate(ctx, p, size)
}

func (s *forgetful) Sync(ctx context.Context, p string) error {
	err := s.Store.Sync(ctx, p)
	if err == nil {
		s.mu.Lock()
		delete(s.durable, p)
		s.mu.Unlock()
	}
	return err
}

// crash puts every file changed since its last fsync back as it was then.
func (s *forgetful) crash(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, b := range s.durable {
		full := filepath.Join(s.root, p)
		var err error
		if b == nil {
			err = os.Remove(full)
		} else {
			err = os.WriteFile(full, b, 0o644)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	clear(s.durable)
}

// TestWrittenBackDataSurvivesACrashOfTheNode writes a new file and
// overwrites an old one, flushes, then crashes the node: the backing file
// system loses what no fsync covered, the engine restarts from its index.
// An extent must not count as clean before its backing file is fsynced:
// the cache would never write it back again, and the data would be lost.
func TestWrittenBackDataSurvivesACrashOfTheNode(t *testing.T) {
	var store *forgetful
	r := newRig(t, 4096, 64, func(c *Config) {
		store = &forgetful{Store: c.Backing, durable: map[string][]byte{}}
		c.Backing = store
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 90, DirtyLow: 80}
	})
	store.root = r.root
	r.writeBacking("old", bytes.Repeat([]byte("o"), 20000))
	want := map[string][]byte{
		"old":   append(bytes.Repeat([]byte("o"), 5000), bytes.Repeat([]byte("n"), 15000)...),
		"new/f": bytes.Repeat([]byte("f"), 30000),
	}
	r.write("old", 5000, want["old"][5000:])
	r.write("new/f", 0, want["new/f"])
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	store.crash(t)
	r.restart()
	if err := r.e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p, data := range want {
		if got := r.backingFile(p); !bytes.Equal(got, data) {
			t.Errorf("backing %s after the crash: %d bytes, %d of them as written, want %d", p, len(got), bytes.Count(got, data[len(data)-1:]), len(data))
		}
	}
}

// TestFailedBackingFsyncKeepsExtentsDirty fails the fsync of backing files
// after write-back: the extents stay dirty, a flush says what is left and
// why, and once fsync works again they are written back.
func TestFailedBackingFsyncKeepsExtentsDirty(t *testing.T) {
	r := newRig(t, 4096, 64, func(c *Config) {
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 90, DirtyLow: 80}
	})
	ctx := context.Background()
	r.faulty.SetError(backing.OpSync, errInjected)
	data := bytes.Repeat([]byte("d"), 10000)
	r.write("d/f", 0, data)
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := r.e.Flush(fctx); !errors.Is(err, ErrDirtyLeft) || !errors.Is(err, errInjected) {
		t.Fatalf("Flush while fsync fails = %v, want ErrDirtyLeft wrapping the fsync's error", err)
	}
	if err := r.e.FlushPath(fctx, "d"); !errors.Is(err, ErrDirtyLeft) || !errors.Is(err, errInjected) {
		t.Fatalf("FlushPath while fsync fails = %v, want ErrDirtyLeft wrapping the fsync's error", err)
	}
	s := r.e.Stats()
	if s.DirtyBytes != int64(len(data)) || s.WriteBackBytes != 0 || !strings.Contains(s.LastWriteBackError, "fsync") {
		t.Fatalf("stats while fsync fails: dirty %d, written back %d, last error %q", s.DirtyBytes, s.WriteBackBytes, s.LastWriteBackError)
	}
	r.faulty.SetError(backing.OpSync, nil)
	if err := r.e.Flush(ctx); err != nil {
		t.Fatalf("Flush once fsync works: %v", err)
	}
	if s := r.e.Stats(); s.DirtyBytes != 0 {
		t.Fatalf("dirty bytes after the flush: %d", s.DirtyBytes)
	}
	if got := r.backingFile("d/f"); !bytes.Equal(got, data) {
		t.Fatalf("backing file: %d bytes, want %d", len(got), len(data))
	}
}
