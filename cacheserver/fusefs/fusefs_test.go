package fusefs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// mount serves a fresh backing directory on a fresh mount point and returns
// both; the mount goes away with the test, lazily if it is still busy.
func mount(t *testing.T, opts Options) (mnt, backing string, s *Server) {
	t.Helper()
	mnt, backing, _, s = mountOver(t, opts, func(p *posixns.FS) *posixns.FS { return p })
	return mnt, backing, s
}

// mountOver is mount of the namespace that wrap makes of the fresh backing
// directory, which it also returns.
func mountOver[T namespace.FS](t *testing.T, opts Options, wrap func(*posixns.FS) T) (mnt, backing string, fsys T, s *Server) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting with mount(2) needs root")
	}
	backing, mnt = t.TempDir(), t.TempDir()
	p, err := posixns.New(backing)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	fsys = wrap(p)
	opts.DirectMount = true
	if s, err = Mount(mnt, fsys, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Unmount(); err != nil {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	return mnt, backing, fsys, s
}

var (
	_ OpenTruncater = (*posixns.FS)(nil)
	_ Allocater     = (*posixns.FS)(nil)
)

func TestParseGroups(t *testing.T) {
	tests := map[string]struct {
		status string
		want   []uint32
	}{
		"several": {"Name:\tsh\nGid:\t1\t1\t1\t1\nGroups:\t4 24 1000 \nNStgid:\t9\n", []uint32{4, 24, 1000}},
		"none":    {"Name:\tsh\nGroups:\t\nNStgid:\t9\n", nil},
		"missing": {"Name:\tsh\n", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, parseGroups([]byte(tc.status))); d != "" {
				t.Errorf("parseGroups (-want +got):\n%s", d)
			}
		})
	}
}

// TestCallerCaps checks that the capabilities of a caller come from the
// calling thread as the kernel has them at the request, and that a thread
// that is gone has none.
func TestCallerCaps(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := uint32(unix.Gettid())
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Fatal(err)
	}
	own := (ident.Caps(data[0].Effective) | ident.Caps(data[1].Effective)<<32) & ident.FSCaps
	if own == 0 {
		t.Skip("the test holds none of the file-system capabilities")
	}
	if got := callerCaps(tid); got != own {
		t.Errorf("callerCaps of this thread = %#x, want %#x", uint64(got), uint64(own))
	}
	dropped := data
	dropped[0].Effective &^= 1 << unix.CAP_DAC_OVERRIDE
	if err := unix.Capset(&hdr, &dropped[0]); err != nil {
		t.Fatal(err)
	}
	got := callerCaps(tid)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		t.Fatal(err)
	}
	if want := own &^ (1 << unix.CAP_DAC_OVERRIDE); got != want {
		t.Errorf("callerCaps of this thread once it dropped CAP_DAC_OVERRIDE = %#x, want %#x", uint64(got), uint64(want))
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if got := callerCaps(uint32(cmd.Process.Pid)); got != 0 {
		t.Errorf("callerCaps of a process that is gone = %#x, want none", uint64(got))
	}
}

func TestMountServesFiles(t *testing.T) {
	for name, opts := range map[string]Options{"no client cache": {}, "client cache": {ClientCache: true}} {
		t.Run(name, func(t *testing.T) {
			mnt, backing, _ := mount(t, opts)
			if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(mnt, "f"), filepath.Join(mnt, "g")); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(mnt, "g"))
			if err != nil || string(got) != "hello" {
				t.Fatalf("read back %q, %v", got, err)
			}
			if got, err := os.ReadFile(filepath.Join(backing, "g")); err != nil || string(got) != "hello" {
				t.Fatalf("backing holds %q, %v", got, err)
			}
			var st unix.Statfs_t
			if err := unix.Statfs(mnt, &st); err != nil || st.Blocks == 0 {
				t.Fatalf("statfs: %+v, %v", st, err)
			}
		})
	}
}

// TestUnlinkOpenFile proves the hidden rename: the descriptor keeps working,
// the name is gone from listings and stat, and the hidden name goes at
// close.
func TestUnlinkOpenFile(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	p := filepath.Join(mnt, "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat after unlink: %v", err)
	}
	if _, err := f.WriteAt([]byte("still here"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
		t.Fatalf("read after unlink %q, %v", buf, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 {
		t.Fatalf("fstat after unlink: nlink %d, %v", st.Nlink, err)
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Fatalf("mount lists %v after unlink", entries)
	}
	if entries, _ := os.ReadDir(backing); len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), hiddenPrefix) {
		t.Fatalf("backing holds %v while the file is open, want one hidden name", entries)
	}
	f.Close()
	waitEntries(t, backing, 0)
}

// TestUnlinkOneNameOfAnOpenFile proves that unlinking one of two names of
// an open file removes it at once: the other name keeps the file, and a
// hidden name would count as a link until the file was closed.
func TestUnlinkOneNameOfAnOpenFile(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	f, err := os.OpenFile(a, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(a, &st); err != nil || st.Nlink != 1 {
		t.Fatalf("stat of the other name: nlink %d, %v; want 1", st.Nlink, err)
	}
	if entries, _ := os.ReadDir(backing); len(entries) != 1 || entries[0].Name() != "a" {
		t.Fatalf("backing holds %v, want only a", entries)
	}
	if _, err := f.WriteAt([]byte("still here"), 0); err != nil {
		t.Fatal(err)
	}
}

// TestRenameOverOpenFile proves that a file replaced by a rename stays
// readable through its descriptor.
func TestRenameOverOpenFile(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	os.WriteFile(a, []byte("new"), 0o644)
	os.WriteFile(b, []byte("old"), 0o644)
	f, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "old" {
		t.Fatalf("replaced file reads %q, %v", buf, err)
	}
	if got, _ := os.ReadFile(b); string(got) != "new" {
		t.Fatalf("b holds %q after the rename", got)
	}
	f.Close()
	waitEntries(t, backing, 1)
}

// TestUnmountBusy proves that a busy mount is refused and stays served.
func TestUnmountBusy(t *testing.T) {
	mnt, _, s := mount(t, Options{ShutdownTimeout: 5e9})
	f, err := os.Create(filepath.Join(mnt, "busy"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Unmount()
	if !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("Unmount of a busy mount = %v, want EBUSY", err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatalf("mount stopped serving after a refused unmount: %v", err)
	}
	f.Close()
	if err := s.Unmount(); err != nil {
		t.Fatal(err)
	}
	s.Wait()
}

// waitEntries waits until dir holds n entries: the kernel sends the release
// of a closed file after close(2) has returned.
func waitEntries(t *testing.T, dir string, n int) {
	t.Helper()
	var entries []os.DirEntry
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if entries, _ = os.ReadDir(dir); len(entries) == n {
			return
		}
	}
	t.Fatalf("%s holds %v after the last close, want %d entries", dir, entries, n)
}

// flushCounter is a namespace that counts Flush calls.
type flushCounter struct {
	*posixns.FS
	flushes atomic.Int32
}

func (f *flushCounter) Flush(ctx context.Context, p string) error {
	f.flushes.Add(1)
	return nil
}

// TestFlushReachesFlusher proves that close(2) reaches a namespace that
// implements Flusher.
func TestFlushReachesFlusher(t *testing.T) {
	mnt, _, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *flushCounter { return &flushCounter{FS: p} })
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := fsys.flushes.Load(); n != 1 {
		t.Fatalf("%d flushes after one close, want 1", n)
	}
}

// TestWriteOnlyOpensBypassThePageCache: without the client cache, a
// write-only open asks for direct I/O, and nothing else does.
func TestWriteOnlyOpensBypassThePageCache(t *testing.T) {
	for _, c := range []struct {
		opts        Options
		flags       uint32
		passthrough bool
		want        uint32
	}{
		{Options{}, syscall.O_WRONLY, false, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES},
		{Options{}, syscall.O_WRONLY | syscall.O_APPEND | syscall.O_CREAT, false, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PARALLEL_DIRECT_WRITES},
		{Options{}, syscall.O_RDWR, false, 0},
		{Options{}, syscall.O_RDONLY, false, 0},
		{Options{ClientCache: true}, syscall.O_WRONLY, false, fuse.FOPEN_KEEP_CACHE},
		{Options{}, syscall.O_WRONLY, true, fuse.FOPEN_PASSTHROUGH},
		{Options{ClientCache: true}, syscall.O_RDONLY, true, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_PASSTHROUGH},
	} {
		if got := c.opts.openFlags(c.flags, c.passthrough); got != c.want {
			t.Errorf("client cache %v, open flags %#o, passthrough %v: FUSE flags %#x, want %#x",
				c.opts.ClientCache, c.flags, c.passthrough, got, c.want)
		}
	}
}

// pairer holds each call until a second one is under way beside it, or
// for a second, and records how many were under way at once.
type pairer struct {
	mu            sync.Mutex
	inFlight, max int
	paired        chan struct{} // closed once two calls were under way
}

func newPairer() pairer { return pairer{paired: make(chan struct{})} }

// enter starts a call, waiting for a partner; the caller calls the
// returned function when the call ends.
func (s *pairer) enter() (leave func()) {
	s.mu.Lock()
	s.inFlight++
	if s.inFlight == 2 && s.max < 2 {
		close(s.paired)
	}
	s.max = max(s.max, s.inFlight)
	s.mu.Unlock()
	select {
	case <-s.paired:
	case <-time.After(time.Second):
	}
	return func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}
}

// most returns the most calls that were under way at once.
func (s *pairer) most() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// pairedWrites pairs the writes of a namespace.
type pairedWrites struct {
	*posixns.FS
	pairer
}

func (s *pairedWrites) WriteAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	defer s.enter()()
	return s.FS.WriteAt(ctx, p, b, off)
}

// TestDirectWritesToOneFileRunInParallel has two processes write their own
// halves of one file through write-only descriptors, as IOR does without
// -F: their writes reach the namespace side by side, not in turn, and the
// file holds both halves.
func TestDirectWritesToOneFileRunInParallel(t *testing.T) {
	mnt, backing, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *pairedWrites {
		return &pairedWrites{FS: p, pairer: newPairer()}
	})
	const half = 8 << 10
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 2*half); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = writeHalf(p, int64(i)*half, bytes.Repeat([]byte{byte('a' + i)}, half))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if most := fsys.most(); most < 2 {
		t.Errorf("at most %d write of the shared file under way at once, want 2", most)
	}
	want := append(bytes.Repeat([]byte{'a'}, half), bytes.Repeat([]byte{'b'}, half)...)
	if got, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("backing file differs from the two halves written: %v", err)
	}
}

// writeHalf writes data at off of p in four writes through a write-only
// descriptor.
func writeHalf(p string, off int64, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	step := len(data) / 4
	for i := 0; i < len(data); i += step {
		if _, err := f.WriteAt(data[i:i+step], off+int64(i)); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// pairedReads pairs the reads of a namespace.
type pairedReads struct {
	*posixns.FS
	pairer
}

func (s *pairedReads) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	defer s.enter()()
	return s.FS.ReadAt(ctx, p, b, off)
}

// TestDirectReadsSendTheirRequestsSideBySide reads 4 MiB of a file with
// O_DIRECT in one call: the kernel sends it in requests of MaxWrite, which
// must reach the namespace side by side (asynchronous direct I/O), as they
// go to the several servers of the file's extents, and bring back the
// file's bytes.
func TestDirectReadsSendTheirRequestsSideBySide(t *testing.T) {
	mnt, backing, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *pairedReads {
		return &pairedReads{FS: p, pairer: newPairer()}
	})
	want := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	if err := os.WriteFile(filepath.Join(backing, "f"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuffer(len(want))
	if n, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf[:n], want) {
		t.Fatalf("O_DIRECT read of %d bytes: %d bytes, %v; or they differ", len(want), n, err)
	}
	select {
	case <-fsys.paired:
	default:
		t.Error("the requests of one O_DIRECT read reached the namespace one at a time")
	}
}

// TestDirectWritesInOneCall overwrites a file and then extends it, each in
// one O_DIRECT write of several requests, which the kernel sends side by
// side inside the file and in turn past its end: the backing file must
// hold both.
func TestDirectWritesInOneCall(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	const n = 4 << 20
	if err := os.WriteFile(filepath.Join(backing, "f"), make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := alignedBuffer(n)
	var want []byte
	for i, off := range []int64{0, n} {
		for j := range buf {
			buf[j] = byte(i*7 + j%251)
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatalf("O_DIRECT write of %d bytes at %d: %v", n, off, err)
		}
		want = append(want, buf...)
	}
	if got, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("backing file of %d bytes, %v; want the %d bytes written", len(got), err, len(want))
	}
}

// alignedBuffer returns n bytes aligned to a page, as O_DIRECT wants them.
func alignedBuffer(n int) []byte {
	page := os.Getpagesize()
	b := make([]byte, n+page)
	off := page - int(uintptr(unsafe.Pointer(&b[0]))%uintptr(page))
	return b[off%page : off%page+n]
}

// TestDirectWritesAreSeenOnTheNode writes through a write-only descriptor
// (direct I/O) over a page that another descriptor has cached and a shared
// mapping has dirtied: the reader and the mapping see the new bytes, and
// the mapping's older bytes outside the write survive it.
func TestDirectWritesAreSeenOnTheNode(t *testing.T) {
	mnt, backing, _ := mount(t, Options{})
	p := filepath.Join(mnt, "f")
	page := os.Getpagesize()
	if err := os.WriteFile(p, []byte(strings.Repeat("a", 2*page)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := mapShared(t, p, 2*page)
	buf := make([]byte, 4)
	if _, err := r.ReadAt(buf, int64(page)); err != nil || string(buf) != "aaaa" {
		t.Fatalf("first read %q, %v", buf, err)
	}
	m.write(0, "MMMMMMMM") // dirty, not yet written back

	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("dddd"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("cccc"), int64(page)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(buf, int64(page)); err != nil || string(buf) != "cccc" {
		t.Errorf("a reader that had the page cached reads %q, %v after the write, want cccc", buf, err)
	}
	if got := m.read(page, 4); got != "cccc" {
		t.Errorf("a shared mapping shows %q after the write, want cccc", got)
	}
	if got := m.read(0, 8); got != "ddddMMMM" {
		t.Errorf("the mapping that dirtied the page shows %q after the write, want ddddMMMM", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	m.sync()
	got, err := os.ReadFile(filepath.Join(backing, "f"))
	if err != nil || string(got[:8]) != "ddddMMMM" || string(got[page:page+4]) != "cccc" {
		t.Errorf("backing file starts %q and holds %q at %d, %v; want ddddMMMM and cccc", got[:8], got[page:page+4], page, err)
	}
}

// TestGrowthElsewhereIsReadThroughAnOpenFile appends to a file behind the
// mount's back, as another mount does, while a reader holds it open with the
// page at its old end cached. Once the reader sees the new size, it must
// read the appended bytes, not the zeros the kernel filled that page with
// past the old end.
func TestGrowthElsewhereIsReadThroughAnOpenFile(t *testing.T) {
	mnt, backing, _ := mount(t, Options{AttrTimeout: time.Millisecond})
	const first, more = "first bytes", "then more"
	if err := os.WriteFile(filepath.Join(backing, "f"), []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 64)
	if n, err := r.ReadAt(buf, 0); string(buf[:n]) != first {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	w, err := os.OpenFile(filepath.Join(backing, "f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(more); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if fi, err := r.Stat(); err != nil || fi.Size() != int64(len(first+more)) {
		t.Fatalf("stat of the open file: %v, %v; want size %d", fi, err, len(first+more))
	}
	if n, err := r.ReadAt(buf, 0); string(buf[:n]) != first+more {
		t.Errorf("read %q, %v after the file grew elsewhere, want %q", buf[:n], err, first+more)
	}
}

// TestNoPermissionsShowAsNone checks that a file and a directory without
// any permission bits show none through the mount, as on the backing file
// system: a copy made through the mount (cp -a, rsync, tar) must not give
// them permissions they never had.
func TestNoPermissionsShowAsNone(t *testing.T) {
	mnt, _, _ := mount(t, Options{})
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f", "d"} {
		p := filepath.Join(mnt, name)
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0 {
			t.Errorf("%s shows permissions %v after chmod 0, want none", name, perm)
		}
	}
}

// attrCounter is a namespace that counts GetAttr calls by path.
type attrCounter struct {
	*posixns.FS
	mu    sync.Mutex
	calls map[string]int
}

func (a *attrCounter) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	a.mu.Lock()
	a.calls[p]++
	a.mu.Unlock()
	return a.FS.GetAttr(ctx, p)
}

func (a *attrCounter) take() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.calls
	a.calls = map[string]int{}
	return c
}

// TestDirectoryNamesAreTrustedForAWhile stats a file under two directories
// twice without the client cache: the second walk asks for the file only,
// as close-to-open needs, and not for the directories on the way. A file
// that appears meanwhile, by another mount or on the backing store, is
// seen at once.
func TestDirectoryNamesAreTrustedForAWhile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting with mount(2) needs root")
	}
	backing, mnt := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(backing, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backing, "a", "b", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := posixns.New(backing)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fsys := &attrCounter{FS: p, calls: map[string]int{}}
	s, err := Mount(mnt, fsys, Options{DirectMount: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unmount()
	f := filepath.Join(mnt, "a", "b", "f")
	if _, err := os.Stat(f); err != nil {
		t.Fatal(err)
	}
	fsys.take()
	if _, err := os.Stat(f); err != nil {
		t.Fatal(err)
	}
	if got := fsys.take(); got["a"] != 0 || got["a/b"] != 0 || got["a/b/f"] == 0 {
		t.Errorf("a second stat of a/b/f asked for %v, want a/b/f only", got)
	}
	if err := os.WriteFile(filepath.Join(backing, "a", "b", "g"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "a", "b", "g")); err != nil {
		t.Errorf("a file made on the backing store is not seen at once: %v", err)
	}
}

// TestListingLooksNothingUp lists a directory, with the client cache and
// without: the listing must ask the servers for no attributes, which in a
// directory of 100,000 files took 11-14 s, and which the kernel would
// trust for a second at most.
func TestListingLooksNothingUp(t *testing.T) {
	for name, opts := range map[string]Options{"plain": {}, "client cache": {ClientCache: true}} {
		t.Run(name, func(t *testing.T) {
			mnt, backing, fsys, _ := mountOver(t, opts, func(p *posixns.FS) *attrCounter {
				return &attrCounter{FS: p, calls: map[string]int{}}
			})
			const files = 200
			if err := os.Mkdir(filepath.Join(backing, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range files {
				if err := os.WriteFile(filepath.Join(backing, "d", fmt.Sprint(i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(filepath.Join(mnt, "d")); err != nil {
				t.Fatal(err)
			}
			fsys.take()
			es, err := os.ReadDir(filepath.Join(mnt, "d"))
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != files {
				t.Errorf("listed %d names, want %d", len(es), files)
			}
			asked := 0
			for p, n := range fsys.take() {
				if p != "d" {
					asked += n
				}
			}
			if asked != 0 {
				t.Errorf("listing %d files asked for the attributes of files %d times, want none", files, asked)
			}
		})
	}
}

// pageCounter is a namespace that counts the entries it lists, whole or in
// pages.
type pageCounter struct {
	*posixns.FS
	mu            sync.Mutex
	whole, listed int
}

func (c *pageCounter) ReadDir(ctx context.Context, p string) ([]namespace.DirEntry, error) {
	es, err := c.FS.ReadDir(ctx, p)
	c.mu.Lock()
	c.whole++
	c.listed += len(es)
	c.mu.Unlock()
	return es, err
}

func (c *pageCounter) ReadDirPage(ctx context.Context, p string, cookie uint64, size int) ([]namespace.DirEntry, uint64, bool, error) {
	es, next, done, err := c.FS.ReadDirPage(ctx, p, cookie, size)
	c.mu.Lock()
	c.listed += len(es)
	c.mu.Unlock()
	return es, next, done, err
}

func (c *pageCounter) counts() (whole, listed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.whole, c.listed
}

// TestListingHoldsAPage begins to list a directory whose entries take
// several pages: the mount asks for the first only, and not for the whole
// listing, which it would hold as long as the directory stays open. Read
// to the end, then again from the start (rewinddir), the listing gives
// every name once.
func TestListingHoldsAPage(t *testing.T) {
	mnt, backing, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *pageCounter { return &pageCounter{FS: p} })
	long := strings.Repeat("n", 100)
	files := 4 * listingPage / (len(long) + namespace.DirEntrySize)
	if err := os.Mkdir(filepath.Join(backing, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(backing, "d", fmt.Sprint(i, long)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := os.Open(filepath.Join(mnt, "d"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.ReadDir(1); err != nil {
		t.Fatal(err)
	}
	if whole, listed := fsys.counts(); whole != 0 || listed >= files/2 {
		t.Errorf("the first entry of %d made the mount list %d entries (%d whole listings), want a page", files, listed, whole)
	}
	for pass := range 2 {
		if _, err := d.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		names, err := d.Readdirnames(-1)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, n := range names {
			seen[n] = true
		}
		if len(names) != files || len(seen) != files {
			t.Errorf("pass %d listed %d names, %d different, want %d", pass, len(names), len(seen), files)
		}
	}
}

// getdentsNames lists dir with getdents(2), "." and ".." included, as
// programs in C read a directory.
func getdentsNames(t *testing.T, dir string) []string {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var names []string
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			slices.Sort(names)
			return names
		}
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			name, _, _ := bytes.Cut(b[19:reclen], []byte{0})
			names = append(names, string(name))
			b = b[reclen:]
		}
	}
}

// TestListingShowsDots checks that a directory lists "." and ".." as on
// the backing file system, with the client cache and without.
func TestListingShowsDots(t *testing.T) {
	for name, opts := range map[string]Options{"plain": {}, "client cache": {ClientCache: true}} {
		t.Run(name, func(t *testing.T) {
			mnt, backing, _ := mount(t, opts)
			if err := os.MkdirAll(filepath.Join(backing, "d", "e"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(backing, "d", "f"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, dir := range []string{"", "d", "d/e"} {
				want := getdentsNames(t, filepath.Join(backing, dir))
				if d := cmp.Diff(want, getdentsNames(t, filepath.Join(mnt, dir))); d != "" {
					t.Errorf("getdents of %q through the mount (-backing +mount):\n%s", dir, d)
				}
			}
		})
	}
}

// TestSameUserNamespace checks that a process of the mount's user
// namespace is told apart from one in a namespace of its own, which maps
// one uid to its root as unshare -Ur does.
func TestSameUserNamespace(t *testing.T) {
	if !sameUserNamespace("/proc/self") {
		t.Fatal("the test's own process is not in its own user namespace")
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("no user namespaces here: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if sameUserNamespace(procDir(uint32(cmd.Process.Pid))) {
		t.Error("a process in a user namespace of its own counts as in the mount's")
	}
	if sameUserNamespace("/proc/no-such-process") {
		t.Error("a process that is gone counts as in the mount's user namespace")
	}
}

// TestFileHolds checks the comparison of a file's bytes with those wanted.
func TestFileHolds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	content := bytes.Repeat([]byte("0 0 4294967295\n"), 100)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want []byte
		ok   bool
	}{
		{"same", content, true},
		{"a prefix", content[:len(content)-1], false},
		{"longer", append(append([]byte{}, content...), '\n'), false},
		{"one byte differs", append(append([]byte{}, content[:700]...), append([]byte{'x'}, content[701:]...)...), false},
		{"nothing", nil, false},
	} {
		if got := fileHolds(p, c.want); got != c.ok {
			t.Errorf("%s: fileHolds = %v, want %v", c.name, got, c.ok)
		}
	}
	if fileHolds(filepath.Join(t.TempDir(), "missing"), nil) {
		t.Error("a missing file holds nothing, but is not there to hold it")
	}
}
