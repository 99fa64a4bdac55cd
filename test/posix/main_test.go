package posix

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/fusefs"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// setup mounts a namespace for a test and returns the mount point and the
// backing directory behind it.
type setup func(t *testing.T, o mountOptions) (dir, backing string)

// setups are the set-ups that the suites run against, by name.
var setups = map[string]setup{
	"inprocess": mountInProcess,
	"local":     mountLocal,
}

// current is the set-up of the run in progress, and currentName its name.
var (
	current     setup
	currentName string
)

// fixedServesOnlyItself names the set-ups whose fixed identity serves only
// callers with that uid and root: a real cache server refuses everyone else
// rather than lend them its identity. The in-process namespace has no such
// gate.
var fixedServesOnlyItself = map[string]bool{"local": true}

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain(os.Args[1:]))
	}
	names := strings.Split(os.Getenv("BURSTCACHE_POSIX_SETUPS"), ",")
	if names[0] == "" {
		names = []string{"inprocess", "local"}
	}
	code := 0
	for _, name := range names {
		current, currentName = setups[name], name
		if current == nil {
			fmt.Fprintf(os.Stderr, "unknown set-up %q in BURSTCACHE_POSIX_SETUPS\n", name)
			os.Exit(2)
		}
		fmt.Printf("=== set-up %s\n", name)
		if c := m.Run(); c != 0 {
			code = c
		}
	}
	for _, p := range []string{helperPath, burstcachePath} {
		if p != "" {
			os.RemoveAll(filepath.Dir(p))
		}
	}
	os.Exit(code)
}

// mountOptions vary the mount under test.
type mountOptions struct {
	// as, if set, is the fixed identity the namespace acts as for every
	// caller; otherwise it acts as each caller.
	as *ident.Cred
	// clientCache turns on the kernel's write-back cache.
	clientCache bool
	// backing, if set, is the backing directory of an earlier mount to
	// serve again, for a second mount of the same files.
	backing string
	// parent, if set, is the directory that holds a new backing
	// directory, instead of the mount's own temporary directory.
	parent string
}

// mountOption sets a mountOptions field.
type mountOption func(*mountOptions)

// actingAs makes the namespace act as c whoever calls.
func actingAs(c ident.Cred) mountOption { return func(o *mountOptions) { o.as = &c } }

// withClientCache turns on the client cache.
func withClientCache() mountOption { return func(o *mountOptions) { o.clientCache = true } }

// sharing mounts the files behind the earlier mount whose backing directory
// is backing, instead of fresh ones.
func sharing(backing string) mountOption { return func(o *mountOptions) { o.backing = backing } }

// backingIn makes the new backing directory in parent.
func backingIn(parent string) mountOption { return func(o *mountOptions) { o.parent = parent } }

// backingDir returns where a new backing directory goes for o, with its
// mount point and the rest of the set-up in base.
func (o mountOptions) backingDir(base string) string {
	if o.parent != "" {
		return filepath.Join(o.parent, "backing")
	}
	return filepath.Join(base, "backing")
}

// mountUnderTest mounts the namespace under test for t, with the set-up of
// the current run, and returns the mount point and the backing directory.
// The mount goes away with the test, lazily if it is still busy.
func mountUnderTest(t *testing.T, opts ...mountOption) (dir, backing string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the POSIX suites need root: they mount with mount(2) and switch identities")
	}
	var o mountOptions
	for _, opt := range opts {
		opt(&o)
	}
	return current(t, o)
}

// settlers holds, by mount point, how to make the backing directory of a
// mount hold what was written through it; mounts that write through need
// nothing.
var settlers sync.Map

// settleBacking makes the backing directory behind the mount at dir hold
// every byte written through it so far: for a cache, it writes back the
// dirty data.
func settleBacking(t *testing.T, dir string) {
	t.Helper()
	if f, ok := settlers.Load(dir); ok {
		f.(func(*testing.T))(t)
	}
}

// hinters holds, by mount point, how to send a cache hint ("flush",
// "evict" or "invalidate") for a path under the mount; mounts without a
// cache have none.
var hinters sync.Map

// hint sends a cache hint for path to the cache behind the mount that holds
// it; for a path under no such mount it does nothing.
func hint(name, path string) error {
	var send func(string, string) error
	hinters.Range(func(dir, f any) bool {
		if strings.HasPrefix(path, dir.(string)+string(filepath.Separator)) {
			send = f.(func(string, string) error)
			return false
		}
		return true
	})
	if send == nil {
		return nil
	}
	return send(name, path)
}

// publicTempDir returns a new directory that every identity may traverse
// (t.TempDir makes its parent 0700).
func publicTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "burstcache-posix-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// mountInProcess serves posixns over fusefs in the test process.
func mountInProcess(t *testing.T, o mountOptions) (dir, backing string) {
	base := publicTempDir(t)
	backing, dir = o.backingDir(base), filepath.Join(base, "mnt")
	for _, d := range []string{backing, dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if o.backing != "" {
		backing = o.backing
	}
	p, err := posixns.New(backing)
	if err != nil {
		t.Fatal(err)
	}
	var fsys namespace.FS = p
	if o.as != nil {
		fsys = fixedIdentity{FS: p, as: *o.as}
	}
	s, err := fusefs.Mount(dir, fsys, fusefs.Options{DirectMount: true, ClientCache: o.clientCache, Debug: os.Getenv("BURSTCACHE_POSIX_DEBUG") != ""})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			unix.Unmount(dir, unix.MNT_DETACH)
		}
		p.Close()
	})
	return dir, backing
}

// helperEnv marks a re-executed test binary that runs one file operation as
// another identity, or in another process (see helperMain).
const helperEnv = "BURSTCACHE_POSIX_HELPER"

// helperCapsEnv holds, in hex, the capabilities that the helper keeps:
// runAs of an identity whose capabilities are known sets it, and the
// helper drops every other one before it runs its operation.
const helperCapsEnv = "BURSTCACHE_POSIX_HELPER_CAPS"

// runAs runs one helper operation (see helperMain) as cred and returns the
// errno it ended with.
func runAs(t *testing.T, cred ident.Cred, args ...string) syscall.Errno {
	t.Helper()
	cmd := exec.Command(helperBinary(t), args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: cred.UID, Gid: cred.GID, Groups: cred.Groups}}
	if cred.HasCaps {
		// Root starts with every capability and drops those it must not
		// have; anyone else gets those it must have as ambient ones.
		cmd.Env = append(cmd.Env, helperCapsEnv+"="+strconv.FormatUint(uint64(cred.Caps), 16))
		for n := range 64 {
			if cred.UID != 0 && cred.Caps.Has(n) {
				cmd.SysProcAttr.AmbientCaps = append(cmd.SysProcAttr.AmbientCaps, uintptr(n))
			}
		}
	}
	out, err := cmd.CombinedOutput()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return syscall.Errno(exit.ExitCode())
	}
	if err != nil {
		t.Fatalf("running helper %v: %v\n%s", args, err, out)
	}
	return 0
}

// runAsRootOfUserNamespace runs one helper operation as root of a user
// namespace of its own, with every capability there, that maps uid and gid
// of the host to its root and nothing else: what any user gets from
// unshare -Ur. It returns the errno the operation ended with.
func runAsRootOfUserNamespace(t *testing.T, uid, gid uint32, args ...string) syscall.Errno {
	t.Helper()
	cmd := exec.Command(helperBinary(t), args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(gid), Size: 1}},
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	out, err := cmd.CombinedOutput()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		return syscall.Errno(exit.ExitCode())
	}
	if err != nil {
		t.Fatalf("running helper %v in a user namespace: %v\n%s", args, err, out)
	}
	return 0
}

var helperPath string

// helperBinary returns a copy of the test binary that other identities may
// execute.
func helperBinary(t *testing.T) string {
	t.Helper()
	if helperPath != "" {
		return helperPath
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "burstcache-posix-helper-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	helperPath = filepath.Join(dir, "helper")
	if err := os.WriteFile(helperPath, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return helperPath
}

// helperMain runs one operation and exits with its errno: "read PATH",
// "list DIR", "write PATH", "create PATH", "unlink PATH", "rename OLD NEW",
// "read-after-drop PATH PATH" (reads the first, drops every capability
// in the same thread and reads the second), "stat PATH", "truncate PATH",
// "chown PATH" (to the caller), "chmod
// PATH" (to 0666), "lock PATH" (a non-blocking POSIX write lock), "flock
// PATH" (a non-blocking exclusive BSD lock), "list-trusted PATH" (EEXIST
// if listxattr shows a name in the trusted namespace) and "map-write PATH
// OFF TEXT" (TEXT written at OFF through a shared mapping of the whole
// file, then msync).
func helperMain(args []string) int {
	if len(args) < 2 {
		return int(syscall.EINVAL)
	}
	if err := keepCaps(os.Getenv(helperCapsEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return int(syscall.EINVAL)
	}
	err := helperOp(args[0], args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return int(namespace.Errno(err))
}

// keepCaps drops every capability but those in hex, when hex is set. The
// kernel keeps capabilities per thread, so the goroutine stays on the
// thread it dropped them on, and so do the operation's system calls.
func keepCaps(hex string) error {
	if hex == "" {
		return nil
	}
	keep, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for i := range data {
		data[i].Permitted &= uint32(keep >> (32 * i))
		data[i].Effective, data[i].Inheritable = data[i].Permitted, 0
	}
	return unix.Capset(&hdr, &data[0])
}

func helperOp(op string, args []string) error {
	switch op {
	case "read":
		_, err := os.ReadFile(args[0])
		return err
	case "read-after-drop":
		runtime.LockOSThread()
		if _, err := os.ReadFile(args[0]); err != nil {
			return fmt.Errorf("before dropping the capabilities: %w", err)
		}
		if err := keepCaps("0"); err != nil {
			return err
		}
		_, err := os.ReadFile(args[1])
		return err
	case "list":
		_, err := os.ReadDir(args[0])
		return err
	case "stat":
		_, err := os.Lstat(args[0])
		return err
	case "write":
		f, err := os.OpenFile(args[0], os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.Write([]byte("x"))
		return errJoin(err, f.Close())
	case "create":
		f, err := os.OpenFile(args[0], os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case "unlink":
		return os.Remove(args[0])
	case "list-trusted":
		return listTrusted(args[0])
	case "truncate":
		return os.Truncate(args[0], 0)
	case "rename":
		return os.Rename(args[0], args[1])
	case "chown":
		return os.Lchown(args[0], os.Getuid(), os.Getgid())
	case "chmod":
		return syscall.Chmod(args[0], 0o666)
	case "map-write":
		return mapWrite(args)
	case "lock", "flock":
		f, err := os.OpenFile(args[0], os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		if op == "flock" {
			return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK}
		return unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk)
	}
	return syscall.ENOSYS
}

// mapWrite writes args[2] at offset args[1] of the file args[0] through a
// shared mapping of the whole file, and syncs it with msync(MS_SYNC). It
// runs in a helper, never in the process that serves the mount: a fault on
// the mapping holds the process's address space while it waits for the
// mount, and the goroutines that would answer may need that address space
// first (the runtime maps memory as the heap grows, and always under the
// race detector), so the process would wait for itself.
func mapWrite(args []string) error {
	if len(args) != 3 {
		return syscall.EINVAL
	}
	off, err := strconv.Atoi(args[1])
	if err != nil {
		return syscall.EINVAL
	}
	f, err := os.OpenFile(args[0], os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	if off+len(args[2]) > len(m) {
		return errJoin(syscall.EINVAL, unix.Munmap(m))
	}
	copy(m[off:], args[2])
	return errJoin(unix.Msync(m, unix.MS_SYNC), unix.Munmap(m))
}

// listTrusted lists the extended attributes of path and fails with EEXIST
// if a name of the trusted namespace is among them.
func listTrusted(path string) error {
	buf := make([]byte, 64<<10)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		return err
	}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if strings.HasPrefix(name, "trusted.") {
			return syscall.EEXIST
		}
	}
	return nil
}

func errJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
