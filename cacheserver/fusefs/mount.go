package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// Options configures a mount. The zero value is a mount without client
// cache, through fusermount, with the defaults below.
type Options struct {
	// MaxWrite is the largest read or write request; 1 MiB if zero.
	MaxWrite int
	// MaxReadAhead is the kernel's read-ahead; 1 MiB if zero.
	MaxReadAhead int
	// ClientCache turns on the kernel's write-back cache and keeps cached
	// pages across opens. Without it, the entry timeout is zero and two
	// mounts see each other's writes after close.
	ClientCache bool
	// AttrTimeout is how long the kernel trusts attributes; one second if
	// zero. Without ClientCache every lookup of a file's name still asks
	// the servers, and its answer refreshes the attributes, so only calls
	// on an open file (fstat) may see a file's that old; a directory's,
	// whose name is trusted for dirEntryTimeout, may be seen that old by
	// any call.
	AttrTimeout time.Duration
	// EntryTimeout is how long the kernel trusts names when ClientCache is
	// on; one second if zero. When ClientCache is off it is zero for the
	// names of files, and dirEntryTimeout for those of directories.
	EntryTimeout time.Duration
	// PerCaller says the servers check every call as its caller, so that
	// users who share the mount are kept apart as on the backing file
	// system (a shared, multi-user instance). Without default_permissions
	// the kernel does not check search permission on a path whose names it
	// trusts, so the names below a directory that not everyone may search
	// are then not trusted at all: each walk asks the servers as the caller.
	PerCaller bool
	// Passthrough, if set, may return a descriptor of the file's data on a
	// local file system for FUSE passthrough (Linux 6.9 and later): the
	// kernel then reads and writes it directly. The mount closes it at
	// release. It is called at every open with the opener's identity.
	Passthrough func(ctx context.Context, path string, flags uint32) (fd int, ok bool)
	// DirectMount mounts with mount(2), which needs root, instead of
	// fusermount3.
	DirectMount bool
	// FsName is the source shown by mount(8) and df(1); "burstcache" if
	// empty. The file system type is always fuse.burstcache.
	FsName string
	// ShutdownTimeout bounds each step of Unmount; ten seconds if zero.
	ShutdownTimeout time.Duration
	// Logger receives the mount's logs; slog.Default() if nil.
	Logger *slog.Logger
	// Debug logs every FUSE request.
	Debug bool
}

// dirEntryTimeout is how long the kernel trusts the names of directories
// when ClientCache is off. A path walk then asks the servers for its last
// name only, not for every directory on the way: three round trips for a
// stat of a/b/f became one. Names of files are looked up at every open,
// for close-to-open consistency; a directory that another mount renamed or
// removed may still be walked through here for that long, as NFS clients
// cache directory entries, and what lies under it is looked up at the
// servers by its path, which then answers that it is gone.
const dirEntryTimeout = time.Second

// ErrShutdownTimeout is returned by Unmount when the kernel or the serving
// loops did not finish in time; the mount was then detached and its FUSE
// connection aborted.
var ErrShutdownTimeout = errors.New("fuse shutdown timed out")

// Server is a mounted namespace.
type Server struct {
	dir     string
	fsys    namespace.FS
	opts    Options
	log     *slog.Logger
	callers callers
	server  *fuse.Server
	root    *node
	// conn is the FUSE connection's number in /sys/fs/fuse/connections.
	conn uint32
	// done is closed when go-fuse's serving loops have returned; stopped
	// when they have, or when Unmount gave up waiting for them.
	done, stopped chan struct{}
	stopOnce      sync.Once
	// dropped counts writes of cached pages that failed (see Dropped).
	dropped droppedWrites
	// pageWrites holds the cancel channels of the requests in flight that
	// write cached pages (pageWrite).
	pageWrites sync.Map
	// names orders the calls that send data under a path with renames
	// (see names.go).
	names sync.RWMutex
	// renames counts the starts and ends of the calls that move names:
	// odd while one is under way (see names.go).
	renames atomic.Uint64
	// umasks holds the callers' umasks of the creations in flight, by
	// their requests' cancel channels (umaskFS).
	umasks sync.Map
	// interest holds the extended attributes that lookups ask about,
	// probes what the servers answered about them, by thread, and
	// xattrChanges counts the changes of extended attributes through the
	// mount (see probe.go).
	interest     xattrInterest
	probes       probes
	xattrChanges atomic.Uint64
	// gens are the generations of inode numbers of files replaced under
	// them (see generations).
	gens generations
	// uses holds when the kernel last used each file, by inode number
	// (see busyChild), and removals the files being removed (see
	// removing).
	uses     usages
	removals removals
	// latest holds, by inode number, the node that last opened or made
	// each regular file (see changedBehind).
	latest sync.Map
	// links holds, by inode number, the target of the symbolic link of
	// that number last read (see linkTarget).
	links sync.Map
}

// Mount mounts fsys on the directory mountpoint and serves it until Unmount.
func Mount(mountpoint string, fsys namespace.FS, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	mountpoint, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", mountpoint, err)
	}
	s := &Server{dir: mountpoint, fsys: fsys, opts: opts, log: opts.Logger, done: make(chan struct{}), stopped: make(chan struct{})}
	server, err := s.mount()
	if err != nil {
		return nil, fmt.Errorf("mounting %s: %w", mountpoint, err)
	}
	s.server = server
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err == nil {
		s.conn = unix.Minor(st.Dev)
	}
	go func() {
		server.Wait()
		close(s.done)
		s.stop()
	}()
	s.log.Info("Serving FUSE mount", "mountpoint", mountpoint, "clientCache", opts.ClientCache)
	return s, nil
}

// mount mounts s on its directory and starts serving it, as fs.Mount does,
// with the writes of cached pages watched (watchedFS) and the umasks of
// creations kept (umaskFS).
func (s *Server) mount() (*fuse.Server, error) {
	opts := s.fsOptions()
	s.root = &node{m: s}
	raw := umaskFS{RawFileSystem: watchedFS{RawFileSystem: fs.NewNodeFS(s.root, opts), m: s}, m: s}
	server, err := fuse.NewServer(raw, s.dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		// As fs.Mount: the serving loop ends by itself when the mount
		// failed.
		return nil, err
	}
	return server, nil
}

func (o Options) withDefaults() Options {
	if o.MaxWrite == 0 {
		o.MaxWrite = 1 << 20
	}
	if o.MaxReadAhead == 0 {
		o.MaxReadAhead = 1 << 20
	}
	o.AttrTimeout = cmpOr(o.AttrTimeout, time.Second)
	if !o.ClientCache {
		o.EntryTimeout = 0
	} else {
		o.EntryTimeout = cmpOr(o.EntryTimeout, time.Second)
	}
	if o.FsName == "" {
		o.FsName = "burstcache"
	}
	o.ShutdownTimeout = cmpOr(o.ShutdownTimeout, 10*time.Second)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// fsOptions translates Options for go-fuse. CAP_HANDLE_KILLPRIV_V2 is asked
// for in every mode: without it the kernel clears setuid bits on write with
// a chmod as the writer, which fails when the writer is not the owner.
// CAP_ASYNC_DIO, which libfuse asks for by default, lets the kernel send
// the requests of an O_DIRECT read or write larger than MaxWrite side by
// side, to the servers of its extents, rather than one after the other,
// and keeps asynchronous I/O (io_submit, io_uring) asynchronous; writes
// that extend the file stay synchronous. CAP_DONT_MASK keeps the kernel
// from applying the caller's umask to the mode of a new file: the backing
// file system applies it, unless the parent directory has a default ACL,
// which a mode already stripped of the umask's bits could not give (see
// umaskFS).
func (s *Server) fsOptions() *fs.Options {
	o := s.opts
	neg := time.Duration(0)
	caps := uint64(fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_ASYNC_DIO | fuse.CAP_DONT_MASK)
	if o.ClientCache {
		caps |= fuse.CAP_WRITEBACK_CACHE
	}
	// go-fuse gives every entry the mount's timeout unless the node set
	// one; a node of a per-caller mount that must not be trusted at all
	// leaves it zero, so the mount has none (newChild sets every other).
	entry := &o.EntryTimeout
	if o.PerCaller {
		entry = nil
	}
	return &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        true,
			FsName:            o.FsName,
			Name:              "burstcache",
			MaxWrite:          o.MaxWrite,
			MaxReadAhead:      o.MaxReadAhead,
			DirectMountStrict: o.DirectMount,
			ExtraCapabilities: caps,
			// Without the client cache every open looks the file up again
			// and drops its cached pages (close-to-open), so the kernel need
			// not ask for attributes before every read, which doubled the
			// round trips of small reads. It must still drop them when it
			// learns that the file changed size, which the kernel does
			// unless it is in fully explicit mode: another mount that grew
			// the file would leave a reader that holds it open the zeros of
			// the cached page at the old end of file.
			ExplicitDataCacheControl: !o.ClientCache,
			DisabledCapabilities:     fuse.CAP_EXPLICIT_INVAL_DATA,
			// READDIRPLUS looks up every name it lists, one round trip to
			// the servers each, which go-fuse makes one after the other.
			// Without the client cache the kernel trusts no file's name it
			// got so (its entry timeout is zero) and looks it up again at
			// its first use; with it, for a second. Listing a directory of
			// 100,000 files took 11-14 s rather than 0.1 s, and ls -l of
			// 5,000 took as long without as with it (2.5-2.8 s, client
			// cache on).
			DisableReadDirPlus: true,
			Debug:              o.Debug,
		},
		EntryTimeout:    entry,
		AttrTimeout:     &o.AttrTimeout,
		NegativeTimeout: &neg,
		// go-fuse would show a file without permission bits as 0644 and a
		// directory as 0755, so that a mount with default_permissions can
		// enter it; this one asks the servers (Access), and must show the
		// mode the backing file has.
		NullPermissions: true,
	}
}

// Dir returns the mount point.
func (s *Server) Dir() string { return s.dir }

// Wait blocks until the mount stops serving: after someone else unmounted
// it, or until Unmount returns, even if a request handler is stuck.
func (s *Server) Wait() {
	<-s.stopped
}

func (s *Server) stop() { s.stopOnce.Do(func() { close(s.stopped) }) }

// Unmount unmounts and waits until the serving loops have stopped. A mount
// still in use fails with EBUSY and stays. When the kernel or the loops
// hang past the shutdown timeout, the mount is detached and its FUSE
// connection aborted, and ErrShutdownTimeout is returned.
func (s *Server) Unmount() error {
	err := s.unmount()
	if err == nil || errors.Is(err, ErrShutdownTimeout) {
		s.stop()
	}
	return err
}

func (s *Server) unmount() error {
	errc := make(chan error, 1)
	go func() { errc <- s.server.Unmount() }()
	aborted := false
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("unmounting %s: %w", s.dir, err)
		}
	case <-time.After(s.opts.ShutdownTimeout):
		s.log.Warn("Aborting a FUSE mount that does not unmount", "mountpoint", s.dir)
		s.abort()
		aborted = true
	}
	select {
	case <-s.done:
		if aborted {
			// The abort failed the requests in flight, writes of cached
			// pages included, which the kernel then drops: the shutdown
			// was not clean, whatever the serving loops did next.
			return fmt.Errorf("unmounting %s: aborted: %w", s.dir, ErrShutdownTimeout)
		}
		return nil
	case <-time.After(s.opts.ShutdownTimeout):
		s.log.Error("Giving up on FUSE request handlers that do not return", "mountpoint", s.dir)
		s.abort()
		return fmt.Errorf("unmounting %s: %w", s.dir, ErrShutdownTimeout)
	}
}

// abort aborts the mount's FUSE connection, which fails every pending
// request and ends the serving loops, and detaches the mount. Connection
// numbers are reused, so the connection is aborted only while the mount
// still shows it: once the mount is gone, the number may name another
// file system's connection.
func (s *Server) abort() {
	if s.showsConn() {
		s.abortConn()
	}
	_ = unix.Unmount(s.dir, unix.MNT_DETACH)
}

// showsConn reports whether the mount point still holds this server's FUSE
// connection.
func (s *Server) showsConn() bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	return mountinfoShows(string(b), "0:"+strconv.Itoa(int(s.conn)), s.dir)
}

// mountinfoShows reports whether a /proc/self/mountinfo text lists device
// dev mounted on dir. The mount point is the fifth field, in which the
// kernel escapes space, tab, newline and backslash in octal.
func mountinfoShows(mountinfo, dev, dir string) bool {
	for line := range strings.SplitSeq(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[2] == dev && mountinfoUnescape.Replace(f[4]) == dir {
			return true
		}
	}
	return false
}

var mountinfoUnescape = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

// abortConn writes to the connection's abort file in the fusectl file
// system, mounted here if nobody has.
func (s *Server) abortConn() {
	const ctl = "/sys/fs/fuse/connections"
	conn := filepath.Join(ctl, strconv.Itoa(int(s.conn)))
	if _, err := os.Stat(conn); err != nil {
		_ = unix.Mount("fusectl", ctl, "fusectl", 0, "")
	}
	if err := os.WriteFile(filepath.Join(conn, "abort"), []byte("1"), 0); err != nil {
		s.log.Error("Aborting the FUSE connection failed", "connection", s.conn, "err", err)
	}
}
