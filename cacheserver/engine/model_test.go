package engine

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/vfs"
)

var soak = flag.Bool("soak", false, "run the long model-based soak")

// modelPaths are the files the model test plays with; "d" exists on the
// backing store so renames into it work.
var modelPaths = []string{"a", "b", "c", "d/e", "d/f"}

// modelRun drives one engine and an in-memory model with the same random
// operations and checks that they agree.
type modelRun struct {
	t     *testing.T
	rng   *rand.Rand
	r     *rig
	model map[string][]byte
	// named holds the paths whose reads and writes name the backing file
	// they open, as a client's do: those of files replaced behind the
	// cache (replaceBehind) always, the others at random.
	named map[string]bool
	crash *vfs.Crashable
	log   []string
}

const modelES = 4096

func newModelRun(t *testing.T, seed uint64) *modelRun {
	m := &modelRun{t: t, rng: rand.New(rand.NewPCG(seed, 7)), model: map[string][]byte{}, named: map[string]bool{}}
	// The backing directory is on tmpfs too: write-back fsyncs it.
	m.r = newRigOver(t, shmDir(t), modelES, 8+int64(seed%8), func(c *Config) {
		c.Dir = filepath.Join(shmDir(t), "cache")
		c.Tunables = Tunables{WriteBackThreads: 1 + int(seed%4), DirtyHigh: 40, DirtyLow: 10, EvictHigh: 70, EvictLow: 50,
			WriteWindow: WriteWindow{Multiplier: -1}}
		m.crash = vfs.NewCrashable(vfs.OS{}, seed)
		c.FS = m.crash
		switch seed % 3 {
		case 0:
			// Copy-ups through memory, as over a backing store that cannot
			// copy in the kernel; the other seeds copy in the kernel.
			c.Backing = memoryOnly(c.Backing)
		case 1:
			// Read-ahead copies in parallel streams.
			c.Backing = withoutReadAhead(c.Backing)
		}
	})
	if err := os.Mkdir(filepath.Join(m.r.root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// shmDir is a directory on tmpfs when there is one, so that the many index
// commits of the model test do not wait for a disk.
func shmDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "engine-test-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func (m *modelRun) fail(format string, args ...any) {
	m.t.Helper()
	tail := m.log[max(0, len(m.log)-300):]
	m.t.Fatalf("%s\nlast operations:\n%s", fmt.Sprintf(format, args...), strings.Join(tail, "\n"))
}

func (m *modelRun) path() string { return modelPaths[m.rng.IntN(len(modelPaths))] }

func (m *modelRun) step() {
	ctx := context.Background()
	switch k := m.rng.IntN(100); {
	case k < 30:
		m.write(ctx)
	case k < 56:
		m.read(ctx)
	case k < 60:
		m.readInOrder(ctx)
	case k < 65:
		m.truncate(ctx)
	case k < 67:
		m.unlink(ctx)
	case k < 69:
		m.doomedUnlink(ctx)
	case k < 71:
		m.rename(ctx)
	case k < 76:
		p := m.path()
		m.do("sync "+p, m.r.e.Sync(ctx, p))
	case k < 79:
		m.do("flush", m.r.e.Flush(ctx))
		m.checkBacking("")
	case k < 81:
		p := m.path()
		m.do("flushpath "+p, m.r.e.FlushPath(ctx, p))
		m.checkBacking(p)
	case k < 82:
		p := m.path()
		m.do("writeout "+p, m.r.e.WriteOut(ctx, p))
		m.checkBacking(p)
	case k < 86:
		p := m.path()
		m.do("evict "+p, m.r.e.EvictPath(ctx, p))
	case k < 90:
		p := m.path()
		m.do("invalidate "+p, m.r.e.InvalidatePath(ctx, p))
	case k < 93:
		m.size(ctx)
	case k < 94:
		m.replaceBehind(ctx)
	case k < 97:
		m.crashRestart(ctx)
	default:
		m.log = append(m.log, "restart")
		m.r.restart()
	}
}

func (m *modelRun) do(what string, err error) {
	m.t.Helper()
	m.log = append(m.log, what)
	if err != nil {
		m.fail("%s: %v", what, err)
	}
}

func (m *modelRun) write(ctx context.Context) {
	p := m.path()
	off := m.rng.Int64N(6 * modelES)
	data := make([]byte, 1+m.rng.IntN(3*modelES))
	for i := range data {
		data[i] = byte(m.rng.IntN(255) + 1)
	}
	ctx, as := m.naming(ctx, p)
	n, err := m.r.e.WriteAt(ctx, p, data, off)
	m.do(fmt.Sprintf("write %s [%d,%d)%s", p, off, off+int64(len(data)), as), err)
	if n != len(data) {
		m.fail("short write %d", n)
	}
	cur := m.model[p]
	if end := off + int64(len(data)); int64(len(cur)) < end {
		cur = append(cur, make([]byte, end-int64(len(cur)))...)
	}
	copy(cur[off:], data)
	m.model[p] = cur
}

func (m *modelRun) read(ctx context.Context) {
	m.readAt(ctx, m.path(), m.rng.Int64N(7*modelES), 1+m.rng.IntN(3*modelES))
}

// readInOrder reads a file from its start to its end in calls of an
// extent, as a sequential reader does, which starts read-ahead.
func (m *modelRun) readInOrder(ctx context.Context) {
	p := m.path()
	for off := int64(0); off == 0 || off < int64(len(m.model[p])); off += modelES {
		m.readAt(ctx, p, off, modelES)
	}
}

func (m *modelRun) readAt(ctx context.Context, p string, off int64, size int) {
	b := make([]byte, size)
	ctx, as := m.naming(ctx, p)
	n, err := m.r.e.ReadAt(ctx, p, b, off)
	m.log = append(m.log, fmt.Sprintf("read %s [%d,%d)%s", p, off, off+int64(len(b)), as))
	cur, ok := m.model[p]
	if !ok {
		if !errors.Is(err, fs.ErrNotExist) {
			m.fail("read of missing %s: n=%d err=%v, want not exist", p, n, err)
		}
		return
	}
	want := []byte{}
	if off < int64(len(cur)) {
		want = cur[off:min(int64(len(cur)), off+int64(len(b)))]
	}
	if n != len(want) || !bytes.Equal(b[:n], want) {
		m.fail("read %s at %d: got %d bytes, want %d; first difference at %d", p, off, n, len(want), firstDiff(b[:n], want))
	}
	if (n < len(b)) != errors.Is(err, io.EOF) || (err != nil && !errors.Is(err, io.EOF)) {
		m.fail("read %s: n=%d of %d, err=%v", p, n, len(b), err)
	}
}

// naming marks ctx for a call that names the backing file p, as the
// client's open found it, for the paths of named and half of the others,
// and says so for the log.
func (m *modelRun) naming(ctx context.Context, p string) (context.Context, string) {
	if !m.named[p] && m.rng.IntN(2) == 0 {
		return ctx, ""
	}
	id, err := backing.IDOf(ctx, backing.NewDir(m.r.root), p)
	if err != nil {
		return ctx, ""
	}
	return ReadingFile(ctx, id), fmt.Sprintf(" naming inode %d", id.Ino)
}

// replaceBehind writes a new file over p on the backing store, or writes p
// over in place, as a job outside the cache does, once the cache wrote
// back what it held of p, often while the engine is stopped: from then on
// every call names the file it opens, and reads the new one.
func (m *modelRun) replaceBehind(ctx context.Context) {
	p := m.path()
	if _, ok := m.model[p]; !ok {
		return
	}
	m.do("flushpath "+p, m.r.e.FlushPath(ctx, p))
	m.checkBacking(p)
	// Half of the time the file is written over in place, which the
	// engine tells only for extents copied from a version it knows, not
	// for a file written through the cache (see ReadingFile): evicted,
	// it holds none, and once a metadata server's stat saw the backing
	// file carry its size (KnownSize), no size either.
	inPlace := m.rng.IntN(2) == 0
	if inPlace {
		m.r.e.KnownSize(p, int64(len(m.model[p])))
		m.do("evict "+p, m.r.e.EvictPath(ctx, p))
	}
	// A read that names the file, as every client of this release does
	// at its open: extents written by calls that named none are taken
	// for that file's (see ReadingFile).
	m.named[p] = true
	m.readAt(ctx, p, 0, 1)
	data := make([]byte, m.rng.IntN(6*modelES))
	for i := range data {
		data[i] = byte(m.rng.IntN(255) + 1)
	}
	bp := filepath.Join(m.r.root, p)
	if inPlace {
		m.changeInPlace(bp, data)
	} else {
		if err := os.WriteFile(bp+".new", data, 0o644); err != nil {
			m.fail("writing the replacement of %s: %v", p, err)
		}
		if err := os.Rename(bp+".new", bp); err != nil {
			m.fail("replacing %s: %v", p, err)
		}
	}
	m.log = append(m.log, fmt.Sprintf("replace %s behind the cache (%d bytes, in place: %v)", p, len(data), inPlace))
	m.model[p] = data
	// Often while the engine was stopped.
	switch m.rng.IntN(3) {
	case 0:
		m.crashRestart(ctx)
	case 1:
		m.log = append(m.log, "restart")
		m.r.restart()
	}
	// The open that names the new file, and its first read.
	m.readAt(ctx, p, 0, 1+len(data))
}

// changeInPlace writes data over the backing file bp in place, once its
// change time moves: a change within the clock tick of the engine's look
// is not told (backing.FileID).
func (m *modelRun) changeInPlace(bp string, data []byte) {
	var before syscall.Stat_t
	if err := syscall.Stat(bp, &before); err != nil {
		m.fail("stat of %s: %v", bp, err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err := os.WriteFile(bp, data, 0o644); err != nil {
			m.fail("writing %s in place: %v", bp, err)
		}
		var after syscall.Stat_t
		if err := syscall.Stat(bp, &after); err != nil {
			m.fail("stat of %s: %v", bp, err)
		}
		if after.Ino != before.Ino {
			m.fail("writing %s in place made another inode", bp)
		}
		if after.Ctim.Nano() > before.Ctim.Nano() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	m.fail("the change time of %s stays at %d", bp, before.Ctim.Nano())
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func (m *modelRun) truncate(ctx context.Context) {
	p := m.path()
	size := m.rng.Int64N(7 * modelES)
	m.do(fmt.Sprintf("truncate %s %d", p, size), m.r.e.Truncate(ctx, p, size))
	cur := m.model[p]
	if int64(len(cur)) > size {
		cur = cur[:size]
	} else {
		cur = append(cur, make([]byte, size-int64(len(cur)))...)
	}
	m.model[p] = cur
}

func (m *modelRun) unlink(ctx context.Context) {
	p := m.path()
	err := m.r.e.Unlink(ctx, p)
	m.log = append(m.log, "unlink "+p)
	if _, ok := m.model[p]; !ok {
		if !errors.Is(err, fs.ErrNotExist) {
			m.fail("unlink of missing %s: %v", p, err)
		}
		return
	}
	if err != nil {
		m.fail("unlink %s: %v", p, err)
	}
	delete(m.model, p)
	delete(m.named, p)
}

// doomedUnlink unlinks a file as a client of servers does: Doom, the
// removal of the backing file (which a namespace created with the file),
// then EndDoom, saying how the removal ended (or that the client cannot
// tell), sometimes twice; the cache may crash at any point in between
// (crashRestart), and the client goes on after the restart. Sometimes the
// end of a failed unlink comes before its Doom. (TestDoomsSurviveACrash
// crashes right after a Doom, with nothing else synced.)
func (m *modelRun) doomedUnlink(ctx context.Context) {
	p := m.path()
	if _, ok := m.model[p]; !ok {
		return
	}
	bp := filepath.Join(m.r.root, p)
	if f, err := os.OpenFile(bp, os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
		f.Close()
	}
	id := m.rng.Uint64() | 1
	if m.rng.IntN(8) == 0 {
		// The Doom's answer got lost, and its end came first: the
		// unlink failed, and the Doom begins nothing.
		m.do(fmt.Sprintf("end doom %s (%d) first", p, NotRemoved), m.r.e.EndDoom(ctx, p, id, NotRemoved))
		doomed, err := m.r.e.Doom(ctx, p, id)
		m.do(fmt.Sprintf("doom %s after its end (kept %v)", p, doomed), err)
		if doomed {
			m.fail("a Doom after its end doomed %s", p)
		}
		return
	}
	doomed, err := m.r.e.Doom(ctx, p, id)
	m.do(fmt.Sprintf("doom %s (kept %v)", p, doomed), err)
	crashAt, removes := m.rng.IntN(8), m.rng.IntN(2) == 0
	if crashAt == 0 {
		m.crashRestart(ctx)
	}
	if removes {
		m.log = append(m.log, "remove the backing file")
		if err := m.r.store.Remove(ctx, p); err != nil {
			m.fail("removing %s: %v", bp, err)
		}
		delete(m.model, p)
		delete(m.named, p)
	}
	if crashAt == 1 {
		m.crashRestart(ctx)
	}
	// The unlink tells how its removal ended, or that it cannot tell.
	how := map[bool]Unlinked{true: Removed, false: NotRemoved}[removes]
	if m.rng.IntN(3) == 0 {
		how = MaybeRemoved
	}
	m.do(fmt.Sprintf("end doom %s (%d)", p, how), m.r.e.EndDoom(ctx, p, id, how))
	if m.rng.IntN(4) == 0 {
		// The caller did not get the answer, and sends the end again.
		m.do(fmt.Sprintf("end doom %s (%d) again", p, how), m.r.e.EndDoom(ctx, p, id, how))
	}
}

func (m *modelRun) rename(ctx context.Context) {
	from, to := m.path(), m.path()
	if _, ok := m.model[from]; !ok || from == to {
		return
	}
	m.do("rename "+from+" "+to, m.r.e.Rename(ctx, from, to))
	m.model[to] = m.model[from]
	delete(m.model, from)
	m.named[to] = m.named[from]
	delete(m.named, from)
}

func (m *modelRun) size(ctx context.Context) {
	p := m.path()
	got, err := m.r.e.Size(ctx, p)
	m.log = append(m.log, "size "+p)
	cur, ok := m.model[p]
	if !ok {
		if !errors.Is(err, fs.ErrNotExist) {
			m.fail("size of missing %s = %d, %v", p, got, err)
		}
		return
	}
	if err != nil || got != int64(len(cur)) {
		m.fail("size %s = %d, %v; want %d", p, got, err, len(cur))
	}
}

// crashRestart syncs everything, crashes the cache directory's file system
// (losing all unsynced slab writes) and reopens: nothing may be lost. Half
// of the crashes are of the whole node, which also loses what the backing
// store had not fsynced: what write-back wrote there but did not see
// fsynced must still be dirty in the cache.
func (m *modelRun) crashRestart(ctx context.Context) {
	for p := range m.model {
		m.do("sync "+p, m.r.e.Sync(ctx, p))
	}
	node := m.rng.IntN(2) == 0
	m.log = append(m.log, fmt.Sprintf("crash (node: %v)", node))
	m.crash.Crash()
	m.r.e.Close()
	if node {
		m.r.store.crash(m.t)
	}
	m.crash = vfs.NewCrashable(vfs.OS{}, m.rng.Uint64())
	m.r.cfg.FS = m.crash
	m.r.open()
}

// checkBacking compares the backing files at or under dir with the model.
func (m *modelRun) checkBacking(dir string) {
	m.t.Helper()
	for _, p := range modelPaths {
		if !under(p, dir) {
			continue
		}
		got, err := os.ReadFile(filepath.Join(m.r.root, p))
		want, ok := m.model[p]
		if !ok {
			if err == nil {
				m.fail("backing has %s, model does not", p)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, want) {
			m.fail("backing %s: %d bytes (err %v), want %d; first difference at %d", p, len(got), err, len(want), firstDiff(got, want))
		}
	}
}

// checkDirtyCounts checks that each file counts its dirty extents right
// (file.dirtyExtents), which reads of a replaced file go by.
func (m *modelRun) checkDirtyCounts() {
	e := m.r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, f := range e.files {
		n := 0
		for _, x := range f.extents {
			if x.list == &e.dirty {
				n++
			}
		}
		if n != f.dirtyExtents {
			m.fail("%s counts %d dirty extents, has %d", p, f.dirtyExtents, n)
		}
	}
}

func TestModel(t *testing.T) {
	seeds, ops := 50, 2000
	if *soak {
		seeds, ops = 400, 20000
	} else if raceEnabled {
		seeds = 10
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newModelRun(t, uint64(seed))
			for range ops {
				m.step()
				m.checkDirtyCounts()
			}
			m.do("final flush", m.r.e.Flush(context.Background()))
			m.checkBacking("")
			if seed%3 != 0 && m.r.e.noKernelCopy.Load() {
				t.Fatal("the kernel refused to copy up: the run did not cover kernel copies")
			}
		})
	}
}
