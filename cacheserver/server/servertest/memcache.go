package servertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
)

// MemCache is an in-memory cache engine over a backing directory: bytes
// written are held until Flush writes them to the same offsets of the
// backing file; reads of bytes never written come from the backing file.
// It is small and slow, and meant only to exercise the server and client.
type MemCache struct {
	dir   string
	mu    sync.Mutex
	files map[string]*memFile
	// Calls records the path operations in order, for tests of ordering.
	Calls []string
	// Reads counts ReadAt calls.
	Reads atomic.Int64
	// dooms has the backing file's inode number for each unlink under way.
	dooms map[uint64]uint64
}

type memFile struct {
	data  []byte
	valid []bool // valid[i]: data[i] was written and is dirty
	size  int64  // size recorded by writes, ExtendSize and Truncate
}

// NewMemCache returns a cache over the backing directory dir.
func NewMemCache(dir string) *MemCache {
	return &MemCache{dir: dir, files: map[string]*memFile{}}
}

// CallLog returns a copy of Calls, which calls served meanwhile do not
// change.
func (m *MemCache) CallLog() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.Calls)
}

// AdmitWriter admits every writer: MemCache has no limits.
func (m *MemCache) AdmitWriter(string, bool) error { return nil }

// ReserveFile reserves nothing: MemCache has no limits.
func (m *MemCache) ReserveFile(string) (bool, error) { return false, nil }

// EndReserve has nothing to end: ReserveFile reserves nothing.
func (m *MemCache) EndReserve(context.Context, string, bool) error { return nil }

// AdmitSize admits every size: MemCache has no limits.
func (m *MemCache) AdmitSize(string, int64, int64) error { return nil }

func (m *MemCache) record(op, path string) {
	m.Calls = append(m.Calls, op+" "+path)
}

func (m *MemCache) file(path string) *memFile {
	f := m.files[path]
	if f == nil {
		f = &memFile{}
		m.files[path] = f
	}
	return f
}

func (m *MemCache) backingSize(path string) (int64, bool) {
	fi, err := os.Stat(filepath.Join(m.dir, path))
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}

// ReadAt reads like the engine: up to the size it knows, with io.EOF.
func (m *MemCache) ReadAt(_ context.Context, path string, p []byte, off int64) (int, error) {
	m.Reads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[path]
	bsize, exists := m.backingSize(path)
	if f == nil && !exists {
		return 0, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	size := bsize
	if f != nil {
		size = max(size, f.size)
	}
	if off >= size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	clear(p[:n])
	if b, err := os.ReadFile(filepath.Join(m.dir, path)); err == nil && off < int64(len(b)) {
		copy(p[:n], b[off:])
	}
	for i := range n {
		if f != nil && off+int64(i) < int64(len(f.valid)) && f.valid[off+int64(i)] {
			p[i] = f.data[off+int64(i)]
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt holds p as dirty data.
func (m *MemCache) WriteAt(_ context.Context, path string, p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.file(path)
	end := off + int64(len(p))
	if end > int64(len(f.data)) {
		f.data = append(f.data, make([]byte, end-int64(len(f.data)))...)
		f.valid = append(f.valid, make([]bool, end-int64(len(f.valid)))...)
	}
	copy(f.data[off:], p)
	for i := off; i < end; i++ {
		f.valid[i] = true
	}
	f.size = max(f.size, end)
	return len(p), nil
}

// Size returns the size the cache knows.
func (m *MemCache) Size(_ context.Context, path string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[path]
	if f == nil {
		return 0, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	return f.size, nil
}

// KnownSize returns the size the cache knows, without the backing file.
func (m *MemCache) KnownSize(path string, _ int64) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.files[path]; f != nil {
		return f.size, true
	}
	return 0, false
}

// ExtendSize records that path is at least size long.
func (m *MemCache) ExtendSize(_ context.Context, path string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("extend", path)
	f := m.file(path)
	f.size = max(f.size, size)
	return nil
}

// Truncate records size.
func (m *MemCache) Truncate(_ context.Context, path string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("truncate", path)
	m.trimLocked(path, size)
	m.file(path).size = size
	return nil
}

// Trim drops data past size.
func (m *MemCache) Trim(_ context.Context, path string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("trim", path)
	m.trimLocked(path, size)
	return nil
}

func (m *MemCache) trimLocked(path string, size int64) {
	f := m.files[path]
	if f == nil {
		return
	}
	if int64(len(f.data)) > size {
		f.data, f.valid = f.data[:size], f.valid[:size]
	}
	f.size = min(f.size, size)
}

// Sync records the call: memory is as durable as this cache gets.
func (m *MemCache) Sync(_ context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("sync", path)
	return nil
}

// Drop forgets path.
func (m *MemCache) Drop(_ context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("drop", path)
	delete(m.files, path)
	return nil
}

// Doom records the call and keeps path, reporting whether it holds any of
// it, and the backing file's inode number for the unlink; it forgets a
// path it holds nothing of. It holds nothing back from a Flush: this cache
// writes back only when asked to.
func (m *MemCache) Doom(_ context.Context, path string, unlink uint64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("doom", path)
	_, held := m.files[path]
	if held {
		if m.dooms == nil {
			m.dooms = map[uint64]uint64{}
		}
		m.dooms[unlink] = m.backingIno(path)
	}
	return held, nil
}

// EndDoom records the end of an unlink's doom as "drop" when the file
// goes, and "undoom" when it stays, which it asks the backing directory
// when the caller cannot tell: a file there with another inode number than
// at the doom is another. It keeps no doom beyond that, and records an end
// sent again, or one for a doom it does not know (it restarted), too.
func (m *MemCache) EndDoom(_ context.Context, path string, unlink uint64, how engine.Unlinked) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, known := m.dooms[unlink]
	delete(m.dooms, unlink)
	now := m.backingIno(path)
	if how == engine.Removed || how == engine.MaybeRemoved && (now == 0 || known && now != ino) {
		m.record("drop", path)
		delete(m.files, path)
		return nil
	}
	m.record("undoom", path)
	return nil
}

// backingIno returns the inode number of the backing file path, or 0.
func (m *MemCache) backingIno(path string) uint64 {
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(m.dir, path), &st) != nil {
		return 0
	}
	return st.Ino
}

// ForgetRemoved records the call; everything this cache holds is dirty,
// and stays.
func (m *MemCache) ForgetRemoved(_ context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("forgetremoved", path)
	return nil
}

// NamesChanged does nothing: the names are on the backing store, which a
// MemCache does not make durable.
func (m *MemCache) NamesChanged(context.Context, ...string) error { return nil }

// NamesRemoved does nothing, as NamesChanged.
func (m *MemCache) NamesRemoved(context.Context, ...string) {}

// NamesMoved does nothing, as NamesChanged.
func (m *MemCache) NamesMoved(context.Context, string, string) error { return nil }

// AttrsChanged does nothing, as NamesChanged.
func (m *MemCache) AttrsChanged(context.Context, ...string) error { return nil }

// HoldDoom records the call.
func (m *MemCache) HoldDoom(_ context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("holddoom", path)
	return nil
}

// FlushAndDrop writes path back and forgets it.
func (m *MemCache) FlushAndDrop(ctx context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("flushdrop", path)
	err := m.flushLocked(path)
	delete(m.files, path)
	return err
}

// FlushAndDropKeepingCounts is FlushAndDrop: MemCache counts no files.
func (m *MemCache) FlushAndDropKeepingCounts(ctx context.Context, path string) error {
	return m.FlushAndDrop(ctx, path)
}

// Flush writes every file back.
func (m *MemCache) Flush(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for p := range m.files {
		errs = append(errs, m.flushLocked(p))
	}
	return errors.Join(errs...)
}

func (m *MemCache) flushLocked(path string) error {
	f := m.files[path]
	if f == nil {
		return nil
	}
	fd, err := os.OpenFile(filepath.Join(m.dir, path), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer fd.Close()
	for i, ok := range f.valid {
		if ok {
			if _, err := fd.WriteAt(f.data[i:i+1], int64(i)); err != nil {
				return err
			}
			f.valid[i] = false
		}
	}
	if fi, err := fd.Stat(); err == nil && fi.Size() < f.size {
		return fd.Truncate(f.size)
	}
	return nil
}

// FlushPath writes path back.
func (m *MemCache) FlushPath(_ context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.flushLocked(path)
}

// EvictPath records the call and writes path back. MemCache keeps no
// clean data apart from the size, which an eviction keeps.
func (m *MemCache) EvictPath(_ context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("evict", path)
	return m.flushLocked(path)
}

// WriteOut records the call and writes path back.
func (m *MemCache) WriteOut(_ context.Context, path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("writeout", path)
	return m.flushLocked(path)
}

// InvalidatePath writes path back and forgets it.
func (m *MemCache) InvalidatePath(ctx context.Context, path string) error {
	return m.FlushAndDrop(ctx, path)
}

// Stats reports the dirty bytes.
func (m *MemCache) Stats() control.Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	var st control.Stats
	st.CapacityBytes = 1 << 30
	for _, f := range m.files {
		for _, ok := range f.valid {
			if ok {
				st.DirtyBytes++
			}
		}
	}
	return st
}

// SetTunables accepts anything.
func (m *MemCache) SetTunables(control.Tunables) error { return nil }
