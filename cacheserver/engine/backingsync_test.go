package engine

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// forgetful is a backing directory that loses, when its node crashes,
// every change to a file's data that no fsync of the file covered, as a
// local or parallel file system does with the dirty pages of its clients.
// Creating, truncating, removing and renaming files count as durable at
// once, as a journal makes them soon. It embeds backing.Dir, so that the
// optional interfaces (copies in the kernel, file identities) stay.
type forgetful struct {
	*backing.Dir
	root string

	mu sync.Mutex
	// durable holds, for each file whose data changed since its last
	// fsync, what a crash leaves of it.
	durable map[string][]byte
}

func newForgetful(root string) *forgetful {
	return &forgetful{Dir: backing.NewDir(root), root: root, durable: map[string][]byte{}}
}

// changing records what a crash leaves of p before its data changes.
func (s *forgetful) changing(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.durable[p]; ok {
		return
	}
	b, err := os.ReadFile(filepath.Join(s.root, p))
	if err != nil {
		b = []byte{}
	}
	s.durable[p] = b
}

func (s *forgetful) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	s.changing(p)
	return s.Dir.WriteAt(ctx, p, b, off)
}

// Truncate cuts or grows what a crash leaves of p too.
func (s *forgetful) Truncate(ctx context.Context, p string, size int64) error {
	err := s.Dir.Truncate(ctx, p, size)
	if err == nil {
		s.mu.Lock()
		if b, ok := s.durable[p]; ok {
			if int64(len(b)) > size {
				b = b[:size]
			}
			s.durable[p] = append(b, make([]byte, size-int64(len(b)))...)
		}
		s.mu.Unlock()
	}
	return err
}

func (s *forgetful) Sync(ctx context.Context, p string) error {
	err := s.Dir.Sync(ctx, p)
	if err == nil {
		s.mu.Lock()
		delete(s.durable, p)
		s.mu.Unlock()
	}
	return err
}

func (s *forgetful) Remove(ctx context.Context, p string) error {
	err := s.Dir.Remove(ctx, p)
	if err == nil {
		s.mu.Lock()
		delete(s.durable, p)
		s.mu.Unlock()
	}
	return err
}

// Rename moves what a crash leaves of the files at or under oldPath.
func (s *forgetful) Rename(ctx context.Context, oldPath, newPath string) error {
	err := s.Dir.Rename(ctx, oldPath, newPath)
	if err == nil {
		s.mu.Lock()
		moved := map[string][]byte{}
		for p, b := range s.durable {
			if under(p, newPath) {
				delete(s.durable, p)
			}
			if under(p, oldPath) {
				moved[newPath+strings.TrimPrefix(p, oldPath)] = b
				delete(s.durable, p)
			}
		}
		maps.Copy(s.durable, moved)
		s.mu.Unlock()
	}
	return err
}

// crash puts every file whose data changed since its last fsync back as
// a crash leaves it.
func (s *forgetful) crash(t testing.TB) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, b := range s.durable {
		if err := os.WriteFile(filepath.Join(s.root, p), b, 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	r := newRig(t, 4096, 64, func(c *Config) {
		c.Tunables = Tunables{WriteBackThreads: 2, DirtyHigh: 90, DirtyLow: 80}
	})
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
	r.store.crash(t)
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
