package fusefs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// prober is a namespace that counts the calls that are round trips to the
// servers.
type prober struct {
	*posixns.FS
	trips atomic.Int64
}

func (p *prober) GetAttr(ctx context.Context, path string) (namespace.Attr, error) {
	p.trips.Add(1)
	return p.FS.GetAttr(ctx, path)
}

func (p *prober) GetAttrProbing(ctx context.Context, path string, names []string) (namespace.Attr, []error, error) {
	p.trips.Add(1)
	return p.FS.GetAttrProbing(ctx, path, names)
}

func (p *prober) Getxattr(ctx context.Context, path, name string, dest []byte) (int, error) {
	p.trips.Add(1)
	return p.FS.Getxattr(ctx, path, name, dest)
}

var _ namespace.XattrProber = (*prober)(nil)

func mountProber(t *testing.T, opts Options) (mnt, backing string, fsys *prober, s *Server) {
	t.Helper()
	return mountOver(t, opts, func(p *posixns.FS) *prober { return &prober{FS: p} })
}

// longListing makes the calls that ls -l makes for each file it lists,
// and returns what they answered.
func longListing(p string) string {
	var st unix.Stat_t
	err := unix.Lstat(p, &st)
	label, labelErr := unix.Lgetxattr(p, "security.selinux", make([]byte, 255))
	acl, aclErr := unix.Getxattr(p, "system.posix_acl_access", nil)
	return fmt.Sprintf("lstat %v, label %d %v, acl %d %v", err, label, labelErr, acl, aclErr)
}

// TestLongListingRoundTrips makes the calls of ls -l for files: after the
// first files, each takes three round trips without the client cache, the
// lookups the kernel makes for each call, instead of five, and one with
// it, whose names the kernel trusts for a while, instead of three; every
// call answers what it answers on the backing directory, an access ACL
// included, which is read from the servers. One thread makes the calls,
// as ls does.
func TestLongListingRoundTrips(t *testing.T) {
	tests := map[string]struct {
		opts  Options
		trips int64
	}{
		"no client cache": {opts: Options{AttrTimeout: time.Minute}, trips: 3},
		"client cache":    {opts: Options{ClientCache: true, AttrTimeout: time.Minute, EntryTimeout: time.Minute}, trips: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			mnt, backing, fsys, _ := mountProber(t, tc.opts)
			const files = 20
			for i := range files {
				if err := os.WriteFile(filepath.Join(backing, fmt.Sprint(i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			setAccessACL(t, filepath.Join(backing, "7"))
			for i := range files {
				before := fsys.trips.Load()
				got := longListing(filepath.Join(mnt, fmt.Sprint(i)))
				trips := fsys.trips.Load() - before
				if want := longListing(filepath.Join(backing, fmt.Sprint(i))); got != want {
					t.Errorf("file %d through the mount: %s, want %s", i, got, want)
				}
				want := tc.trips
				if i == 7 {
					want++
				}
				if i >= 2 && trips != want {
					t.Errorf("file %d took %d round trips, want %d", i, trips, want)
				}
			}
		})
	}
}

// setAccessACL gives p the access ACL u::rw-,g::r--,o::r--,u:2000:rw- (and
// its mask), or skips the test when the file system has no POSIX ACLs.
func setAccessACL(t *testing.T, p string) {
	t.Helper()
	b := []byte{2, 0, 0, 0}
	for _, e := range [][3]uint32{{1, 6, 0xffffffff}, {2, 6, 2000}, {4, 4, 0xffffffff}, {0x10, 6, 0xffffffff}, {0x20, 4, 0xffffffff}} {
		b = append(b, byte(e[0]), byte(e[0]>>8), byte(e[1]), byte(e[1]>>8), byte(e[2]), byte(e[2]>>8), byte(e[2]>>16), byte(e[2]>>24))
	}
	err := unix.Setxattr(p, "system.posix_acl_access", b, 0)
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the file system of %s has no POSIX ACLs", p)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// readXattr reads the attribute user.x of the open file fd as the calling
// thread.
func readXattr(fd int) string {
	buf := make([]byte, 64)
	n, err := unix.Fgetxattr(fd, "user.x", buf)
	if err != nil {
		return err.Error()
	}
	return string(buf[:n])
}

// TestAbsentXattrsAreAnsweredOnlyAfterTheirLookup proves which getxattr an
// absence found at a lookup answers: one by the thread that looked the file
// up, once, within the attribute timeout, and none after a change of the
// file's attributes through the mount, a lookup by the thread that failed,
// or an invalidation of the file. Calls through a descriptor make no
// lookup of their own, so they show which answer they got.
func TestAbsentXattrsAreAnsweredOnlyAfterTheirLookup(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Answers serve for the attribute timeout: a long one keeps a slow
	// machine from showing a read that the servers answered because it
	// came too late.
	mnt, backing, fsys, s := mountProber(t, Options{AttrTimeout: time.Minute})
	name, file := filepath.Join(mnt, "f"), filepath.Join(backing, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(name, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if got := readXattr(fd); got != unix.ENODATA.Error() {
		t.Fatalf("user.x of a new file: %s, want ENODATA", got)
	}
	stat := func() {
		var st unix.Stat_t
		if err := unix.Stat(name, &st); err != nil {
			t.Fatal(err)
		}
	}
	set := func(v string) {
		if err := unix.Setxattr(file, "user.x", []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}

	stat()
	before := fsys.trips.Load()
	if got := readXattr(fd); got != unix.ENODATA.Error() || fsys.trips.Load() != before {
		t.Errorf("user.x right after a lookup: %s in %d round trips, want ENODATA in none", got, fsys.trips.Load()-before)
	}

	stat()
	set("1")
	readXattr(fd) // May answer the absence that the lookup found.
	if got := readXattr(fd); got != "1" {
		t.Errorf("user.x read twice after one lookup: %s, want 1", got)
	}

	unix.Removexattr(file, "user.x")
	stat()
	if err := unix.Fsetxattr(fd, "user.x", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readXattr(fd); got != "2" {
		t.Errorf("user.x set through the mount after a lookup: %s, want 2", got)
	}

	unix.Removexattr(file, "user.x")
	stat()
	set("3")
	other := make(chan string)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		other <- readXattr(fd)
	}()
	if got := <-other; got != "3" {
		t.Errorf("user.x read by a thread that made no lookup: %s, want 3", got)
	}
	unix.Removexattr(file, "user.x")
	stat()
	set("4")
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(mnt, "missing"), &st); err == nil {
		t.Fatal("a file that does not exist was found")
	}
	if got := readXattr(fd); got != "4" {
		t.Errorf("user.x read after a failed lookup of another name: %s, want 4", got)
	}

	unix.Removexattr(file, "user.x")
	stat()
	set("5")
	s.Invalidate([]string{"f"})
	if got := readXattr(fd); got != "5" {
		t.Errorf("user.x read after an invalidation of the file: %s, want 5", got)
	}

	unix.Removexattr(file, "user.x")
	stat()
	set("6")
	if got, err := unix.Getxattr(name, "user.x", make([]byte, 8)); err != nil || got != 1 {
		t.Errorf("user.x read by its path: %d, %v, want 1 byte", got, err)
	}
}

// TestAbsentXattrsAgeWithTheAttributes reads an attribute through a
// descriptor past the attribute timeout of the last lookup: the servers
// answer it.
func TestAbsentXattrsAgeWithTheAttributes(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const ttl = 100 * time.Millisecond
	mnt, backing, _, _ := mountProber(t, Options{AttrTimeout: ttl})
	name, file := filepath.Join(mnt, "f"), filepath.Join(backing, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(name, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	readXattr(fd)
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(file, "user.x", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl + ttl/2)
	if got := readXattr(fd); got != "1" {
		t.Errorf("user.x past the attribute timeout of the lookup: %s, want 1", got)
	}
}

func TestXattrInterest(t *testing.T) {
	var x xattrInterest
	start := time.Now()
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		x.note(name, start.Add(time.Duration(i)*time.Second))
	}
	tests := map[string]struct {
		at   time.Duration
		want []string
	}{
		"the most recent":        {at: 5 * time.Second, want: []string{"b", "c", "d", "e"}},
		"those seen lately":      {at: probeInterest + 2500*time.Millisecond, want: []string{"d", "e"}},
		"none once all grew old": {at: probeInterest + 5*time.Second, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := x.names(start.Add(tc.at))
			slices.Sort(got)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("names (-want +got):\n%s", d)
			}
		})
	}
}

// TestAbsentXattrsAnswerOnlyTheirIdentity reads an attribute that root's
// lookup found absent as another identity of the same thread: the servers
// answer it, and refuse it, since reading a user attribute needs read
// permission, which that identity lacks.
func TestAbsentXattrsAnswerOnlyTheirIdentity(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mnt, backing, _, _ := mountProber(t, Options{AttrTimeout: time.Minute})
	name := filepath.Join(mnt, "f")
	if err := os.WriteFile(filepath.Join(backing, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(name, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	readXattr(fd)
	var st unix.Stat_t
	if err := unix.Stat(name, &st); err != nil {
		t.Fatal(err)
	}
	unix.Setfsuid(65534)
	got := readXattr(fd)
	unix.Setfsuid(0)
	if got != unix.EACCES.Error() {
		t.Errorf("user.x of a file of mode 0600 read as another uid after root's lookup: %s, want EACCES", got)
	}
}

// TestProbesOfFewThreadsAreKept makes lookups in more threads than the
// mount keeps probes of: it keeps no more.
func TestProbesOfFewThreadsAreKept(t *testing.T) {
	var ps probes
	for pid := range uint32(maxProbeThreads + 10) {
		ps.keep(fuse.NewContext(context.Background(), &fuse.Caller{Pid: pid + 1}), &xattrProbe{})
	}
	if n := len(ps.byThread); n > maxProbeThreads {
		t.Errorf("kept the probes of %d threads, want at most %d", n, maxProbeThreads)
	}
}
