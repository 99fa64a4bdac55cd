package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/server/servertest"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

const testExtent = 4096

// setup starts n servers over a fresh backing directory and returns a
// connected client and the instance.
func setup(t *testing.T, n int) (*FS, *servertest.Instance) {
	t.Helper()
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: n, ExtentSize: testExtent, Secret: "k"})
	return connect(t, in), in
}

func connect(t *testing.T, in *servertest.Instance) *FS {
	t.Helper()
	return connectWith(t, Options{Servers: in.Data, Secret: []byte("k"), ExtentSize: testExtent})
}

// connectWith returns a connected client made with opts, closed with the
// test.
func connectWith(t *testing.T, opts Options) *FS {
	t.Helper()
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Connect(context.Background()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return f
}

func flushAll(t *testing.T, in *servertest.Instance) {
	t.Helper()
	for _, c := range in.Caches {
		if err := c.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func create(t *testing.T, f *FS, p string) {
	t.Helper()
	if _, err := f.Create(context.Background(), p, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, f *FS, p string, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	got, err := f.ReadAt(context.Background(), p, buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return buf[:got]
}

// TestRandomWritesMatchAModel writes random ranges through a striped client
// and checks reads, the size, where the data went and, after a flush, the
// backing file.
func TestRandomWritesMatchAModel(t *testing.T) {
	f, in := setup(t, 3)
	ctx := context.Background()
	create(t, f, "big")
	var model []byte
	rng := rand.New(rand.NewPCG(1, 2))
	for range 60 {
		off := rng.IntN(12 * testExtent)
		p := make([]byte, 1+rng.IntN(3*testExtent))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(ctx, "big", p, int64(off)); err != nil {
			t.Fatal(err)
		}
		if end := off + len(p); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], p)
	}
	if got := readAll(t, f, "big", len(model)+100); !bytes.Equal(got, model) {
		t.Fatalf("read back %d bytes that differ from the %d written", len(got), len(model))
	}
	if err := f.Flush(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	a, err := connect(t, in).GetAttr(ctx, "big")
	if err != nil || a.Size != int64(len(model)) {
		t.Fatalf("size seen by another client = %d, %v; want %d", a.Size, err, len(model))
	}
	for i, c := range in.Caches {
		if c.Stats().DirtyBytes == 0 {
			t.Errorf("server %d got no data: writes were not striped", i)
		}
	}
	flushAll(t, in)
	onDisk, err := os.ReadFile(filepath.Join(in.Backing, "big"))
	if err != nil || !bytes.Equal(onDisk, model) {
		t.Fatalf("backing file: %d bytes (%v), differs from the model of %d", len(onDisk), err, len(model))
	}
}

func TestHolesReadAsZeros(t *testing.T) {
	f, _ := setup(t, 3)
	ctx := context.Background()
	create(t, f, "sparse")
	one := bytes.Repeat([]byte{1}, 10)
	for _, off := range []int64{5, 2*testExtent + 7} {
		if _, err := f.WriteAt(ctx, "sparse", one, off); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]byte, 2*testExtent+17)
	copy(want[5:], one)
	copy(want[2*testExtent+7:], one)
	if got := readAll(t, f, "sparse", 3*testExtent); !bytes.Equal(got, want) {
		t.Errorf("read %d bytes, want %d with zeros between the writes", len(got), len(want))
	}
}

// TestCloseToOpen checks that a second client sees a file's growth once the
// writer flushed (closed) it. The write goes to the second extent, which is
// not on the metadata server, so only the writer can tell its size.
func TestCloseToOpen(t *testing.T) {
	writer, in := setup(t, 2)
	reader := connect(t, in)
	ctx := context.Background()
	create(t, writer, "f")
	data := append(make([]byte, testExtent), bytes.Repeat([]byte("x"), testExtent)...)
	if _, err := writer.WriteAt(ctx, "f", data[testExtent:], testExtent); err != nil {
		t.Fatal(err)
	}
	if err := writer.Flush(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	after, err := reader.Open(ctx, "f", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size != int64(len(data)) {
		t.Errorf("size seen after the writer closed = %d, want %d", after.Size, len(data))
	}
	if got := readAll(t, reader, "f", len(data)); !bytes.Equal(got, data) {
		t.Errorf("reader got %d bytes, want %d", len(got), len(data))
	}
}

func TestTruncateTrimsEveryServer(t *testing.T) {
	data := bytes.Repeat([]byte("abc"), 2*testExtent)
	tests := map[string]struct {
		truncate func(*FS, string, int64) (namespace.Attr, error)
		size     int64
	}{
		"setattr": {func(f *FS, p string, size int64) (namespace.Attr, error) {
			return f.SetAttr(context.Background(), p, namespaceSize(size))
		}, testExtent + 100},
		"open O_TRUNC": {func(f *FS, p string, _ int64) (namespace.Attr, error) {
			return f.Open(context.Background(), p, os.O_WRONLY|os.O_TRUNC)
		}, 0},
		// The kernel creates a name it did not find, which another mount
		// may have made meanwhile.
		"create O_TRUNC of a file that exists": {func(f *FS, p string, _ int64) (namespace.Attr, error) {
			return f.Create(context.Background(), p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		}, 0},
		"create of a file that exists": {func(f *FS, p string, _ int64) (namespace.Attr, error) {
			return f.Create(context.Background(), p, os.O_WRONLY|os.O_CREATE, 0o644)
		}, int64(len(data))},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, in := setup(t, 3)
			ctx := context.Background()
			create(t, f, "t")
			if _, err := f.WriteAt(ctx, "t", data, 0); err != nil {
				t.Fatal(err)
			}
			size := tc.size
			if a, err := tc.truncate(f, "t", size); err != nil || a.Size != size {
				t.Fatalf("size answered = %d, %v; want %d", a.Size, err, size)
			}
			a, err := connect(t, in).GetAttr(ctx, "t")
			if err != nil || a.Size != size {
				t.Fatalf("size after truncate = %d, %v; want %d", a.Size, err, size)
			}
			flushAll(t, in)
			onDisk, _ := os.ReadFile(filepath.Join(in.Backing, "t"))
			if !bytes.Equal(onDisk, data[:size]) {
				t.Errorf("backing file has %d bytes, want the first %d written", len(onDisk), size)
			}
		})
	}
}

// TestUnlinkDoomsDataBeforeTheName checks the order of an unlink: every
// server dooms the file's data (keeps it, unwritten), the metadata server
// removes the name and drops its share, and the servers that kept data
// drop it.
func TestUnlinkDoomsDataBeforeTheName(t *testing.T) {
	f, in := setup(t, 2)
	ctx := context.Background()
	create(t, f, "gone")
	if _, err := f.WriteAt(ctx, "gone", make([]byte, 3*testExtent), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Unlink(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	flushAll(t, in)
	if _, err := os.Stat(filepath.Join(in.Backing, "gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backing file after unlink and flush: %v, want it gone", err)
	}
	for i, c := range in.Caches {
		want := []string{"doom gone", "drop gone"}
		if diff := cmp.Diff(want, dataCalls(c)); diff != "" {
			t.Errorf("server %d calls (-want +got):\n%s", i, diff)
		}
	}
}

// dataCalls returns the calls of c that keep or forget data.
func dataCalls(c *servertest.MemCache) []string {
	var calls []string
	for _, c := range c.CallLog() {
		for _, op := range []string{"doom ", "undoom ", "drop ", "flushdrop "} {
			if strings.HasPrefix(c, op) {
				calls = append(calls, c)
			}
		}
	}
	return calls
}

// failingUnlink is a namespace whose removals of names fail after the
// caller was found allowed to make them: the backing store failed, or the
// answer of a removal that happened got lost (removed set).
type failingUnlink struct {
	namespace.FS
	removed bool
}

func (n failingUnlink) Unlink(ctx context.Context, p string) error {
	if n.removed {
		if err := n.FS.Unlink(ctx, p); err != nil {
			return err
		}
	}
	return syscall.EIO
}

// TestFailedUnlinkKeepsData: the data of a file whose unlink failed stays
// with the file, and that of a file the failed unlink removed all the same
// goes with it.
func TestFailedUnlinkKeepsData(t *testing.T) {
	for name, removed := range map[string]bool{"file kept": false, "file removed, answer lost": true} {
		t.Run(name, func(t *testing.T) {
			in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 2, ExtentSize: testExtent, Secret: "k",
				WrapNS: func(ns namespace.FS) namespace.FS { return failingUnlink{ns, removed} }})
			f := connect(t, in)
			ctx := context.Background()
			create(t, f, "f")
			data := bytes.Repeat([]byte("d"), 3*testExtent)
			if _, err := f.WriteAt(ctx, "f", data, 0); err != nil {
				t.Fatal(err)
			}
			if err := f.Unlink(ctx, "f"); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Unlink = %v, want EIO", err)
			}
			end := "undoom f"
			if removed {
				end = "drop f"
			}
			for i, c := range in.Caches {
				if diff := cmp.Diff([]string{"doom f", end}, dataCalls(c)); diff != "" {
					t.Errorf("server %d calls (-want +got):\n%s", i, diff)
				}
			}
			if removed {
				return
			}
			if got := readAll(t, f, "f", len(data)); !bytes.Equal(got, data) {
				t.Errorf("data after a failed unlink: %q..., want %q...", got[:8], data[:8])
			}
			flushAll(t, in)
			if got, err := os.ReadFile(filepath.Join(in.Backing, "f")); err != nil || !bytes.Equal(got, data) {
				t.Errorf("backing file after a failed unlink and a flush: %d bytes, %v; want the data", len(got), err)
			}
		})
	}
}

// TestUnreachedUnlinkEndsItsDoom: an unlink whose removal never reached
// the metadata server, which stopped after the servers doomed the file,
// ends the doom at once: the file is still there. Asking the stopped
// server whether it is would fail, and leave the doom, and the writes to
// the file, waiting for the servers' timeout. The stopped server gets its
// end once it is back.
func TestUnreachedUnlinkEndsItsDoom(t *testing.T) {
	f, in := setup(t, 2)
	ctx := context.Background()
	create(t, f, "f")
	if _, err := f.WriteAt(ctx, "f", bytes.Repeat([]byte("d"), 2*testExtent), 0); err != nil {
		t.Fatal(err)
	}
	u := unlink{path: "f", id: 1}
	if err := f.doom(ctx, &u); err != nil || len(u.servers) != 2 {
		t.Fatalf("doom = %v, %v; want both servers", u.servers, err)
	}
	meta := f.layout.MetaServer("f")
	other := 1 - meta
	in.Stop(t, meta)
	// The connections to the stopped server fail once each, as lost, and
	// a call that changes nothing is sent again on the next one. Whether a
	// connection already knows it is lost when a call picks it depends on
	// timing: one such call per connection leaves none that does not.
	for range f.conns {
		if _, err := f.GetAttr(ctx, "f"); !errors.Is(err, wire.ErrUnreachable) {
			t.Fatalf("GetAttr through the stopped metadata server: %v, want %v", err, wire.ErrUnreachable)
		}
	}
	_, err := f.meta(ctx, "f", wire.OpUnlink, pathArgs("f"))
	if !errors.Is(err, wire.ErrUnreachable) {
		t.Fatalf("unlink through the stopped metadata server: %v, want %v", err, wire.ErrUnreachable)
	}
	f.endUnlink(ctx, u, err, func() {})
	if diff := cmp.Diff([]string{"doom f", "undoom f"}, dataCalls(in.Caches[other])); diff != "" {
		t.Errorf("calls of the server that stayed (-want +got):\n%s", diff)
	}
	// The stopped server, which keeps the doom in its index, is told once
	// it is back.
	in.Restart(t, meta)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(dataCalls(in.Caches[meta]), []string{"undoom f"}) {
		if time.Now().After(deadline) {
			t.Fatalf("calls of the restarted server: %q, want the undoom", dataCalls(in.Caches[meta]))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowUnlink is a namespace whose removals of names take a while, as on a
// parallel file system whose metadata server fails over.
type slowUnlink struct {
	namespace.FS
	delay time.Duration
}

func (n slowUnlink) Unlink(ctx context.Context, p string) error {
	time.Sleep(n.delay)
	return n.FS.Unlink(ctx, p)
}

// TestSlowUnlinkHoldsItsDoom: an unlink holds the doom of the file on the
// servers that kept its data for as long as the removal takes, so that
// they do not end the doom by themselves meanwhile, and stops once it
// ended the doom.
func TestSlowUnlinkHoldsItsDoom(t *testing.T) {
	in := servertest.Start(t, t.TempDir(), servertest.Options{Servers: 2, ExtentSize: testExtent, Secret: "k",
		WrapNS: func(ns namespace.FS) namespace.FS { return slowUnlink{ns, 400 * time.Millisecond} }})
	f := connectWith(t, Options{Servers: in.Data, Secret: []byte("k"), ExtentSize: testExtent, DoomHold: 50 * time.Millisecond})
	ctx := context.Background()
	create(t, f, "f")
	if _, err := f.WriteAt(ctx, "f", make([]byte, 2*testExtent), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Unlink(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	for i, c := range in.Caches {
		calls := dataCalls(c)
		var holds int
		for _, call := range c.Calls {
			if call == "holddoom f" {
				holds++
			}
		}
		if holds == 0 {
			t.Errorf("server %d: no hold of the doom during a 400 ms unlink (calls %q)", i, c.Calls)
		}
		if last := c.Calls[len(c.Calls)-1]; last == "holddoom f" {
			t.Errorf("server %d: the doom was held after the unlink ended it (calls %q)", i, calls)
		}
	}
}

// TestRefusedUnlinkKeepsData checks that a caller who may not remove a name
// does not make the cache forget the file's data.
func TestRefusedUnlinkKeepsData(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	tests := map[string]struct {
		dirMode uint32
		wantErr error
	}{
		"directory not writable": {dirMode: 0o755, wantErr: syscall.EACCES},
		"sticky directory":       {dirMode: 0o1777, wantErr: syscall.EPERM},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			backing := t.TempDir()
			os.Chmod(filepath.Dir(backing), 0o755)
			if err := syscall.Chmod(backing, tc.dirMode); err != nil {
				t.Fatal(err)
			}
			in := servertest.Start(t, backing, servertest.Options{Servers: 2, ExtentSize: testExtent, Secret: "k", ActAsCaller: true})
			f := connect(t, in)
			create(t, f, "keep")
			if err := os.Chown(filepath.Join(backing, "keep"), 1000, 1000); err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("k"), 2*testExtent)
			if _, err := f.WriteAt(context.Background(), "keep", data, 0); err != nil {
				t.Fatal(err)
			}
			other := ident.NewContext(context.Background(), ident.Cred{UID: 2000, GID: 2000})
			if err := f.Unlink(other, "keep"); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Unlink as another user: %v, want %v", err, tc.wantErr)
			}
			if got := readAll(t, f, "keep", len(data)); !bytes.Equal(got, data) {
				t.Errorf("data after a refused unlink: %d bytes, want %d", len(got), len(data))
			}
			// A doom that began while the right was checked ended: the
			// servers write the data back at once, not after their doom
			// timeout.
			for i, c := range in.Caches {
				calls := dataCalls(c)
				if slices.Contains(calls, "doom keep") && calls[len(calls)-1] != "undoom keep" {
					t.Errorf("server %d: the refused unlink left the file doomed (calls %q)", i, calls)
				}
			}
			flushAll(t, in)
			if got, err := os.ReadFile(filepath.Join(backing, "keep")); err != nil || !bytes.Equal(got, data) {
				t.Errorf("backing file after the refused unlink: %d bytes, %v; want %d", len(got), err, len(data))
			}
		})
	}
}

func TestRenameKeepsTheData(t *testing.T) {
	f, in := setup(t, 3)
	ctx := context.Background()
	create(t, f, "old")
	data := bytes.Repeat([]byte("r"), 2*testExtent+5)
	if _, err := f.WriteAt(ctx, "old", data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Rename(ctx, "old", "new", 0); err != nil {
		t.Fatal(err)
	}
	other := connect(t, in)
	if _, err := other.Open(ctx, "new", os.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, other, "new", len(data)+1); !bytes.Equal(got, data) {
		t.Errorf("renamed file reads %d bytes, want %d", len(got), len(data))
	}
	if _, err := other.GetAttr(ctx, "old"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("old name: %v, want ENOENT", err)
	}
}

// movesOfF are the calls that write a file back and forget it before they
// give it a new name: rename and link of "f" to "g".
var movesOfF = map[string]func(*FS, context.Context) error{
	"rename": func(f *FS, ctx context.Context) error { return f.Rename(ctx, "f", "g", 0) },
	"link": func(f *FS, ctx context.Context) error {
		_, err := f.Link(ctx, "f", "g")
		return err
	},
}

// TestMoveWithAServerDownKeepsSizes renames and links a file whose
// extents lie on every server while the server of its last extent is
// down. The move fails; no other server may forget the file, and the size
// its metadata server recorded with it, before every server wrote the
// file back: the end of the file stays on the stopped server, dirty.
func TestMoveWithAServerDownKeepsSizes(t *testing.T) {
	for name, move := range movesOfF {
		t.Run(name, func(t *testing.T) {
			f, in := setup(t, 3)
			ctx := context.Background()
			create(t, f, "f")
			if _, err := f.WriteAt(ctx, "f", bytes.Repeat([]byte("s"), 3*testExtent-100), 0); err != nil {
				t.Fatal(err)
			}
			down := (f.layout.MetaServer("f") + 2) % 3
			in.Stop(t, down)
			if err := move(f, ctx); err == nil {
				t.Fatalf("%s with server %d down succeeded", name, down)
			}
			for i, c := range in.Caches {
				if calls := dataCalls(c); i != down && slices.Contains(calls, "flushdrop f") {
					t.Errorf("server %d forgot f while server %d held its end: calls %q", i, down, calls)
				}
			}
		})
	}
}

// TestSetuidClearedOnWrite checks that a write by an unprivileged caller
// clears setuid and setgid, as the kernel would on the backing file system.
func TestSetuidClearedOnWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	backing := t.TempDir()
	// The caller must reach the backing directory, as on the file system
	// itself: the test's temporary parent is 0700.
	os.Chmod(filepath.Dir(backing), 0o755)
	os.Chmod(backing, 0o777)
	in := servertest.Start(t, backing, servertest.Options{Servers: 2, ExtentSize: testExtent, Secret: "k", ActAsCaller: true})
	f := connect(t, in)
	user := ident.NewContext(context.Background(), ident.Cred{UID: 1000, GID: 1000})
	if _, err := f.Create(user, "prog", os.O_RDWR|os.O_CREATE, 0o6775); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Open(user, "prog", os.O_RDWR); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(user, "prog", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(backing, "prog"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("mode after write = %v, want setuid and setgid cleared", fi.Mode())
	}
}

// TestServerActsOnlyAsMappedIdentities checks that a server acting as the
// caller, given the ids an administrator mapped, refuses callers outside
// them and does not use their supplementary groups outside them, whatever
// the caller says it is.
func TestServerActsOnlyAsMappedIdentities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	backing := t.TempDir()
	os.Chmod(filepath.Dir(backing), 0o755)
	os.Chmod(backing, 0o755)
	for dir, gid := range map[string]int{"mapped": 3000, "unmapped": 4000} {
		os.Mkdir(filepath.Join(backing, dir), 0o750)
		os.WriteFile(filepath.Join(backing, dir, "data"), []byte(dir), 0o640)
		os.Chown(filepath.Join(backing, dir, "data"), 5000, gid)
		os.Chown(filepath.Join(backing, dir), 5000, gid)
	}
	in := servertest.Start(t, backing, servertest.Options{Servers: 2, ExtentSize: testExtent, Secret: "k", ActAsCaller: true,
		CallerUIDs: ident.Ranges{{Min: 1000, Max: 1000}}, CallerGIDs: ident.Ranges{{Min: 1000, Max: 1000}, {Min: 3000, Max: 3000}}})
	f := connect(t, in)
	as := func(c ident.Cred) context.Context { return ident.NewContext(context.Background(), c) }
	member := as(ident.Cred{UID: 1000, GID: 1000, Groups: []uint32{3000, 4000}})
	if _, err := f.Open(member, "mapped/data", os.O_RDONLY); err != nil {
		t.Errorf("a caller of mapped ids in a mapped group: %v", err)
	}
	if _, err := f.Open(member, "unmapped/data", os.O_RDONLY); !errors.Is(err, syscall.EACCES) {
		t.Errorf("a caller's group outside the mapped gids opened a file of that group: %v", err)
	}
	for _, c := range []ident.Cred{{UID: 2000, GID: 1000}, {UID: 1000, GID: 2000}, {UID: 2000, GID: 2000, Groups: []uint32{1000, 3000}}} {
		if _, err := f.ReadDir(as(c), "mapped"); !errors.Is(err, syscall.EACCES) {
			t.Errorf("caller %s, outside the mapped ids: readdir got %v, want EACCES", c, err)
		}
	}
	// Root is the mount's own identity: it passes, and a root without
	// capabilities still gets no group outside the mapped ones.
	root := as(ident.Cred{UID: 0, GID: 0, Groups: []uint32{3000, 4000}, HasCaps: true})
	if _, err := f.Open(root, "mapped/data", os.O_RDONLY); err != nil {
		t.Errorf("root without capabilities, in a mapped group: %v", err)
	}
	if _, err := f.Open(root, "unmapped/data", os.O_RDONLY); !errors.Is(err, syscall.EACCES) {
		t.Errorf("root without capabilities used a group outside the mapped gids: %v", err)
	}
}

// syncDirRecorder records the directories its servers' namespaces fsync.
type syncDirRecorder struct {
	namespace.FS
	mu     *sync.Mutex
	synced *[]string
}

func (r *syncDirRecorder) SyncDir(ctx context.Context, p string) error {
	r.mu.Lock()
	*r.synced = append(*r.synced, p)
	r.mu.Unlock()
	return r.FS.(namespace.DirSyncer).SyncDir(ctx, p)
}

// TestSyncDirReachesTheBackingDirectory checks that the fsync of a
// directory goes, once, to its metadata server's backing directory.
func TestSyncDirReachesTheBackingDirectory(t *testing.T) {
	backing := t.TempDir()
	os.Mkdir(filepath.Join(backing, "d"), 0o755)
	os.WriteFile(filepath.Join(backing, "f"), nil, 0o644)
	var synced []string
	var mu sync.Mutex
	in := servertest.Start(t, backing, servertest.Options{Servers: 3, ExtentSize: testExtent, Secret: "k",
		WrapNS: func(ns namespace.FS) namespace.FS { return &syncDirRecorder{FS: ns, mu: &mu, synced: &synced} }})
	f := connect(t, in)
	ctx := context.Background()
	for _, p := range []string{"d", ""} {
		synced = nil
		if err := f.SyncDir(ctx, p); err != nil {
			t.Fatalf("SyncDir(%q): %v", p, err)
		}
		if len(synced) != 1 || synced[0] != p {
			t.Errorf("SyncDir(%q) fsynced %q on the servers, want it once", p, synced)
		}
	}
	if err := f.SyncDir(ctx, "f"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("SyncDir of a file: %v, want ENOTDIR", err)
	}
}

// TestDisjointWritersOfOneFile has several clients write disjoint ranges of
// one shared file at once, as N-to-1 checkpoints do.
func TestDisjointWritersOfOneFile(t *testing.T) {
	_, in := setup(t, 3)
	const writers, block = 6, testExtent + 1000
	ctx := context.Background()
	create(t, connect(t, in), "shared")
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		c := connect(t, in)
		wg.Go(func() {
			p := bytes.Repeat([]byte{byte('a' + w)}, block)
			_, err := c.WriteAt(ctx, "shared", p, int64(w*block))
			if err == nil {
				err = c.Flush(ctx, "shared")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var want []byte
	for w := range writers {
		want = append(want, bytes.Repeat([]byte{byte('a' + w)}, block)...)
	}
	reader := connect(t, in)
	if got := readAll(t, reader, "shared", len(want)+10); !bytes.Equal(got, want) {
		t.Errorf("shared file reads %d bytes that differ from the %d written", len(got), len(want))
	}
}

func TestErrors(t *testing.T) {
	f, in := setup(t, 2)
	ctx := context.Background()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	tests := map[string]struct {
		opts    Options
		wantErr error
	}{
		"wrong secret":    {Options{Servers: in.Data, Secret: []byte("nope"), ExtentSize: testExtent}, syscall.EACCES},
		"servers swapped": {Options{Servers: []string{in.Data[1], in.Data[0]}, Secret: []byte("k"), ExtentSize: testExtent}, ErrMisconfigured},
		"wrong extent":    {Options{Servers: in.Data, Secret: []byte("k"), ExtentSize: 2 * testExtent}, ErrMisconfigured},
		"unreachable":     {Options{Servers: []string{in.Data[0], deadAddr}, Secret: []byte("k"), ExtentSize: testExtent}, syscall.ECONNREFUSED},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if err := c.Connect(ctx); !errors.Is(err, tc.wantErr) {
				t.Errorf("Connect: %v, want %v", err, tc.wantErr)
			}
			if time.Since(start) > 3*time.Second {
				t.Errorf("Connect took %v", time.Since(start))
			}
		})
	}
	if _, err := f.GetAttr(ctx, "missing"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("GetAttr(missing): %v, want ENOENT", err)
	}
	if err := f.Rmdir(ctx, "missing"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Rmdir(missing): %v, want ENOENT", err)
	}
}

func TestNamespaceOperations(t *testing.T) {
	f, _ := setup(t, 3)
	ctx := context.Background()
	if _, err := f.Mkdir(ctx, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	create(t, f, "d/a")
	if _, err := f.Symlink(ctx, "a", "d/l"); err != nil {
		t.Fatal(err)
	}
	if target, err := f.Readlink(ctx, "d/l"); err != nil || target != "a" {
		t.Errorf("Readlink = %q, %v", target, err)
	}
	target, a, err := f.ReadlinkAttr(ctx, "d/l")
	if want, _ := f.GetAttr(ctx, "d/l"); err != nil || target != "a" || a.Ino != want.Ino || a.Mode != want.Mode || !a.Ctime.Equal(want.Ctime) {
		t.Errorf("ReadlinkAttr = %q, %+v, %v; want a, %+v", target, a, err, want)
	}
	if err := f.Setxattr(ctx, "d/a", "user.k", []byte("value"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := f.Getxattr(ctx, "d/a", "user.k", buf); err != nil || string(buf[:n]) != "value" {
		t.Errorf("Getxattr = %q, %v", buf[:n], err)
	}
	es, err := f.ReadDir(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"a", "l"}, names); diff != "" {
		t.Errorf("ReadDir (-want +got):\n%s", diff)
	}
	st, err := f.StatFS(ctx)
	if err != nil || st.Blocks*uint64(st.Bsize) != 3<<30 {
		t.Errorf("StatFS = %+v, %v; want 3 GiB of cache", st, err)
	}
}

// TestClosePublishesSizes checks that a client that goes away (an unmount)
// publishes how far its writes extended files.
func TestClosePublishesSizes(t *testing.T) {
	_, in := setup(t, 2)
	writer := connect(t, in)
	ctx := context.Background()
	create(t, writer, "g")
	if _, err := writer.WriteAt(ctx, "g", []byte("tail"), 5*testExtent); err != nil {
		t.Fatal(err)
	}
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	a, err := connect(t, in).GetAttr(ctx, "g")
	if err != nil || a.Size != 5*testExtent+4 {
		t.Errorf("size after the writer closed = %d, %v; want %d", a.Size, err, 5*testExtent+4)
	}
}

// TestGrowthIsVisibleWithoutFlush checks that another client sees how far a
// write extended a file as soon as the write returns, even if the writer
// never flushes (the FUSE layer need not tell it about closes).
func TestGrowthIsVisibleWithoutFlush(t *testing.T) {
	writer, in := setup(t, 3)
	ctx := context.Background()
	create(t, writer, "h")
	for i := range 4 {
		p := bytes.Repeat([]byte{byte(i)}, testExtent)
		if _, err := writer.WriteAt(ctx, "h", p, int64(i)*testExtent); err != nil {
			t.Fatal(err)
		}
		a, err := connect(t, in).GetAttr(ctx, "h")
		if want := int64(i+1) * testExtent; err != nil || a.Size != want {
			t.Fatalf("after write %d: size %d, %v; want %d", i, a.Size, err, want)
		}
	}
}

// TestLoadBalancedReadsFromOneServer checks that a load-balanced client
// reads whole files from the one server its node picks, and that the
// instance refuses changes.
func TestLoadBalancedReadsFromOneServer(t *testing.T) {
	backing := t.TempDir()
	data := randomData(5*testExtent + 3)
	if err := os.WriteFile(filepath.Join(backing, "input"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, backing, servertest.Options{Servers: 3, ExtentSize: testExtent, Secret: "k", LoadBalanced: true})
	ctx := context.Background()
	used := map[int]bool{}
	for _, node := range []string{"node-a", "node-b", "node-c", "node-d"} {
		f, err := New(Options{Servers: in.Data, Secret: []byte("k"), ExtentSize: testExtent, LoadBalanced: true, Node: node})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		before := reads(in)
		if got := readAll(t, f, "input", len(data)+1); !bytes.Equal(got, data) {
			t.Errorf("%s read %d bytes that differ from the file", node, len(got))
		}
		after := reads(in)
		var servers []int
		for i := range after {
			if after[i] != before[i] {
				servers = append(servers, i)
			}
		}
		if len(servers) != 1 || servers[0] != f.indexes[0] {
			t.Errorf("%s read from servers %v, want only server %d", node, servers, f.indexes[0])
		}
		used[f.indexes[0]] = true
		if _, err := f.WriteAt(ctx, "input", []byte("x"), 0); !errors.Is(err, syscall.EROFS) {
			t.Errorf("write: %v, want EROFS", err)
		}
		if _, err := f.Create(ctx, "new", os.O_RDWR|os.O_CREATE, 0o644); !errors.Is(err, syscall.EROFS) {
			t.Errorf("create: %v, want EROFS", err)
		}
	}
	if len(used) < 2 {
		t.Errorf("four nodes all used one server: %v", used)
	}
	striped, _ := New(Options{Servers: in.Data, Secret: []byte("k"), ExtentSize: testExtent})
	defer striped.Close()
	if err := striped.Connect(ctx); !errors.Is(err, ErrMisconfigured) {
		t.Errorf("striped client of a load-balanced instance: %v, want ErrMisconfigured", err)
	}
}

func reads(in *servertest.Instance) []int64 {
	var n []int64
	for _, c := range in.Caches {
		n = append(n, c.Reads.Load())
	}
	return n
}

func randomData(n int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// TestInterruptedChangesComplete checks that a namespace change whose
// caller was interrupted (a cancelled context) is carried out and answered,
// not abandoned: a caller that retried an exclusive create would otherwise
// find the file it made itself.
func TestInterruptedChangesComplete(t *testing.T) {
	f, in := setup(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Create(ctx, "excl", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		t.Fatalf("interrupted create: %v", err)
	}
	if _, err := f.Mkdir(ctx, "dir", 0o755); err != nil {
		t.Fatalf("interrupted mkdir: %v", err)
	}
	for _, p := range []string{"excl", "dir"} {
		if _, err := os.Stat(filepath.Join(in.Backing, p)); err != nil {
			t.Errorf("%s after an interrupted creation: %v", p, err)
		}
	}
}

// TestTruncateOpenAfterChmod checks ftruncate through a descriptor whose
// file lost its write permission after the open: allowed, while truncate
// by name is refused.
func TestTruncateOpenAfterChmod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("acting as another user needs root")
	}
	backing := t.TempDir()
	os.Chmod(filepath.Dir(backing), 0o755)
	os.Chmod(backing, 0o777)
	in := servertest.Start(t, backing, servertest.Options{Servers: 2, ExtentSize: testExtent, Secret: "k", ActAsCaller: true})
	f := connect(t, in)
	user := ident.NewContext(context.Background(), ident.Cred{UID: 1000, GID: 1000})
	if _, err := f.Create(user, "t", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(user, "t", bytes.Repeat([]byte("z"), 3*testExtent), 0); err != nil {
		t.Fatal(err)
	}
	mode := uint32(0o444)
	if _, err := f.SetAttr(user, "t", namespace.SetAttr{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.SetAttr(user, "t", namespaceSize(10)); !errors.Is(err, syscall.EACCES) {
		t.Errorf("truncate by name of a read-only file: %v, want EACCES", err)
	}
	a, err := f.TruncateOpen(user, "t", testExtent+1)
	if err != nil || a.Size != testExtent+1 {
		t.Fatalf("TruncateOpen = size %d, %v; want %d", a.Size, err, testExtent+1)
	}
	if got := readAll(t, connect(t, in), "t", 3*testExtent); len(got) != testExtent+1 {
		t.Errorf("another client reads %d bytes after ftruncate, want %d", len(got), testExtent+1)
	}
}

// TestCloseMakesWritesDurable checks that a close makes the data this
// client wrote durable on the servers the writes went to, and only there,
// and that a close with nothing written since, or an fsync, syncs nothing
// more.
func TestCloseMakesWritesDurable(t *testing.T) {
	f, in := setup(t, 4)
	ctx := context.Background()
	syncs := func() []int {
		var got []int
		for i, c := range in.Caches {
			for _, call := range c.Calls {
				if call == "sync small" {
					got = append(got, i)
				}
			}
		}
		return got
	}
	create(t, f, "small")
	if _, err := f.WriteAt(ctx, "small", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	want := []int{f.layout.Split("small", 0, 1)[0].Server}
	if got := syncs(); !slices.Equal(got, want) {
		t.Fatalf("servers synced at close: %v, want %v (the one the write went to)", got, want)
	}
	if err := f.Flush(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	if got := syncs(); !slices.Equal(got, want) {
		t.Fatalf("servers synced after a second close: %v, want still %v", got, want)
	}
	if _, err := f.WriteAt(ctx, "small", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Fsync(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	if got := len(syncs()); got != 1+len(in.Caches) {
		t.Fatalf("%d syncs after an fsync and a close, want %d: the fsync's, on every server, and none at the close", got, 1+len(in.Caches))
	}
}

// TestLoadBalancedClientFailsOver: every server of a load-balanced
// instance serves every file, so a client whose server is lost (its node
// went down) reads from the next one instead of failing, mounts even when
// its server is down from the start, and goes back to its own server once
// that one is back, so that the load spreads again.
func TestLoadBalancedClientFailsOver(t *testing.T) {
	backing := t.TempDir()
	data := randomData(5*testExtent + 3)
	if err := os.WriteFile(filepath.Join(backing, "input"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	in := servertest.Start(t, backing, servertest.Options{Servers: 3, ExtentSize: testExtent, Secret: "k", LoadBalanced: true})
	home := failoverHome
	failoverHome = 300 * time.Millisecond
	t.Cleanup(func() { failoverHome = home })
	connect := func() *FS {
		t.Helper()
		return connectWith(t, Options{Servers: in.Data, Secret: []byte("k"), ExtentSize: testExtent, LoadBalanced: true, Node: "node-a"})
	}
	readFrom := func(f *FS) []int {
		t.Helper()
		before := reads(in)
		if got := readAll(t, f, "input", len(data)+1); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes that differ from the file", len(got))
		}
		var servers []int
		for i, n := range reads(in) {
			if n != before[i] {
				servers = append(servers, i)
			}
		}
		return servers
	}
	f := connect()
	own := f.indexes[0]
	next := (own + 1) % 3
	in.Stop(t, own)
	if got := readFrom(f); !slices.Equal(got, []int{next}) {
		t.Fatalf("with server %d lost, read from servers %v, want only %d", own, got, next)
	}
	if got := readFrom(connect()); !slices.Equal(got, []int{next}) {
		t.Fatalf("a client that connected with server %d lost read from servers %v, want only %d", own, got, next)
	}
	in.Restart(t, own)
	time.Sleep(failoverHome)
	if got := readFrom(f); !slices.Equal(got, []int{own}) {
		t.Fatalf("with server %d back, read from servers %v, want only it", own, got)
	}
}

// TestReadDirLargerThanAnAnswer lists a directory whose entries take more
// than the largest answer a server may send (wire.MaxMeta): the client
// gets them all, each once.
func TestReadDirLargerThanAnAnswer(t *testing.T) {
	f, in := setup(t, 2)
	dir := filepath.Join(in.Backing, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Names of the longest length, as links of one file: it takes fewest
	// entries, made the quickest way.
	long := strings.Repeat("x", 255-6)
	files := wire.MaxMeta/(len(long)+6+namespace.DirEntrySize) + 1000
	target := filepath.Join(in.Backing, "f")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if err := os.Link(target, filepath.Join(dir, fmt.Sprintf("%06d%s", i, long))); err != nil {
			t.Fatal(err)
		}
	}
	es, err := f.ReadDir(context.Background(), "d")
	if err != nil {
		t.Fatalf("listing %d names of 255 bytes: %v", files, err)
	}
	seen := map[string]bool{}
	for _, e := range es {
		seen[e.Name] = true
	}
	if len(es) != files || len(seen) != files {
		t.Errorf("listed %d entries, %d different, want %d", len(es), len(seen), files)
	}
}
