package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/fusefs"
)

// The mount gives the servers the hidden names of files it hides, so that
// the teardown can remove them, or give them their names back.
var _ fusefs.HiddenNoter = (*client.FS)(nil)

type mountFlags struct {
	servers     []string
	secretFile  string
	mountKey    string
	clientCache bool
	perCaller   bool
	extentSize  sizeFlag
	readyFile   string
	exitFile    string
	timeout     time.Duration
	loadBalance bool
	node        string
	debug       bool
}

func newMountCmd() *cobra.Command {
	f := &mountFlags{extentSize: 1 << 20}
	cmd := &cobra.Command{
		Use:   "mount --servers HOST:PORT,... MOUNTPOINT",
		Short: "Mount a cache instance with FUSE, in the foreground",
		Long: `mount serves the files of a cache instance at MOUNTPOINT through FUSE,
striping data over the servers given in index order. It runs in the
foreground until SIGTERM or SIGINT, then unmounts, publishing what it
wrote. Exit codes: 2 bad input, 4 mount point in use, 5 a server is
unreachable, 7 what the mount was given could not all be made durable
or published (its log names the files).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return recordExit(f.exitFile, runMount(cmd.Context(), f, args[0]))
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.servers, "servers", nil, "data addresses of the servers, in index order")
	fl.StringVar(&f.secretFile, "secret-file", "", "file holding the servers' shared secret")
	fl.StringVar(&f.mountKey, "mount-key-file", "", "file holding the private mount key (base64 of its seed), for servers that admit only mounts that sign with it (--mount-public-key)")
	fl.BoolVar(&f.perCaller, "per-caller", false, "the servers act as each caller (--act-as-caller): trust no name below a directory that not everyone may search, so that each walk is checked as its caller")
	fl.BoolVar(&f.clientCache, "client-cache", false, "use the kernel's page cache and write-back cache (no close-to-open consistency between mounts)")
	fl.Var(&f.extentSize, "extent-size", "extent size of the instance")
	fl.BoolVar(&f.loadBalance, "load-balanced", false, "mount a read-only load-balanced instance, reading from the one server --node picks")
	fl.StringVar(&f.node, "node", "", "node name that picks the server of a load-balanced instance (default: the host name)")
	fl.BoolVar(&f.debug, "debug", false, "log every FUSE request")
	fl.StringVar(&f.readyFile, "ready-file", "", "write the process id to this file once the mount serves")
	fl.StringVar(&f.exitFile, "exit-file", "", "write the exit code, as JSON, to this file when the mount process ends; code 0 means everything written was published")
	fl.DurationVar(&f.timeout, "shutdown-timeout", 20*time.Second, "how long unmounting may wait for a busy mount before detaching it")
	return cmd
}

func runMount(ctx context.Context, f *mountFlags, mountpoint string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(f.servers) == 0 {
		return badInput("--servers is required")
	}
	spliceWholeReads(log)
	raiseProcs()
	mp, err := checkMountpoint(mountpoint)
	if err != nil {
		return err
	}
	secret, err := readSecret(f.secretFile)
	if err != nil {
		return err
	}
	mountKey, err := readMountKey(f.mountKey)
	if err != nil {
		return err
	}
	opts := client.Options{Servers: f.servers, Secret: secret, MountKey: mountKey, ExtentSize: int64(f.extentSize), LoadBalanced: f.loadBalance, Node: f.node, Log: log,
		GathersWrites: f.clientCache}
	if opts.Node == "" {
		opts.Node, _ = os.Hostname()
	}
	c, err := connectClient(ctx, opts)
	if err != nil {
		return err
	}
	srv, err := fusefs.Mount(mp, c, fusefs.Options{
		ClientCache: f.clientCache, PerCaller: f.perCaller, DirectMount: os.Geteuid() == 0, Logger: log,
		FsName: "burstcache:" + f.servers[0], ShutdownTimeout: f.timeout, Debug: f.debug,
	})
	if err != nil {
		_ = c.Close()
		return withCode(exitMountBusy, err)
	}
	c.Watch(srv.Invalidate)
	if f.perCaller && !inInitialPIDNamespace() {
		log.Warn("The mount runs in a pid namespace of its own: callers outside it reach it without a pid, so their supplementary groups and capabilities cannot be read; run it in the host's pid namespace (hostPID)")
	}
	if err := raiseReadahead(mp, 1<<20); err != nil {
		log.Warn("Raising the mount's readahead failed; sequential reads go in 128 KiB requests", "err", err)
	}
	// The mount takes SIGTERM from before its ready file says it serves: a
	// supervisor stops it as soon as it reads that file, and a signal that
	// came before the handler would kill it with nothing recorded, as if
	// it had lost what it held.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	// Once it ends, the mount still publishes and records its exit (the
	// caller's recordExit): a second signal, such as local down's stop of
	// a mount that a first one is bringing down, must not kill it in
	// between, or its supervisor would read that it lost what it held.
	defer func() { signal.Ignore(syscall.SIGTERM, syscall.SIGINT); stop() }()
	if f.readyFile != "" {
		if err := writeJSONFile(f.readyFile, readyInfo{PID: os.Getpid()}); err != nil {
			log.Error("Writing the ready file failed", "err", err)
		}
	}
	return serveMount(ctx, srv, c, f.timeout, log)
}

// readMountKey reads the private mount key from path; an empty path means
// none.
func readMountKey(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, badInput("--mount-key-file: %w", err)
	}
	k, err := control.ParseMountKey(string(b))
	if err != nil {
		return nil, badInput("--mount-key-file %s: %w", path, err)
	}
	return k, nil
}

// exitInfo is what a mount writes to --exit-file as it ends. A supervisor
// that is not the mount's parent, such as a restarted CSI node plugin,
// learns from it whether the mount published what it wrote.
type exitInfo struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
}

// recordExit writes err's exit code to path, when path is set, and returns
// err. A mount killed outright writes nothing, which a supervisor must read
// as a mount that did not publish.
func recordExit(path string, err error) error {
	if path == "" {
		return err
	}
	info := exitInfo{}
	if err != nil {
		info = exitInfo{Code: exitCode(err), Error: err.Error()}
	}
	if werr := writeJSONFile(path, info); werr != nil {
		return errors.Join(err, fmt.Errorf("writing the exit file: %w", werr))
	}
	return err
}

// serveMount waits until ctx ends (a signal) or an unmount from outside,
// then unmounts and publishes what the client wrote.
func serveMount(ctx context.Context, srv *fusefs.Server, c *client.FS, timeout time.Duration, log *slog.Logger) error {
	gone := make(chan struct{})
	go func() { srv.Wait(); close(gone) }()
	var err error
	select {
	case <-gone:
		log.Info("Mount was unmounted from outside")
	case <-ctx.Done():
		log.Info("Unmounting on signal", "mountpoint", srv.Dir())
		// The unmount writes back the kernel's dirty pages, and waits for
		// those whose server is away: for timeout, not for ever.
		c.Stopping(timeout)
		err = unmountBusy(srv, gone, timeout, log)
	}
	if cerr := c.Close(); cerr != nil {
		err = addUnpublished(err, fmt.Errorf("making durable and publishing what the mount was given: %w", cerr))
	}
	// Writes of cached pages that failed were dropped by the kernel, which
	// may have told nobody.
	return addUnpublished(err, srv.Dropped())
}

// addUnpublished adds to err that the mount could not publish what it was
// given (lost), with exitUnpublished as the exit code when err has none.
func addUnpublished(err, lost error) error {
	if lost == nil {
		return err
	}
	lost = withCode(exitUnpublished, lost)
	if err == nil {
		return lost
	}
	return errors.Join(err, lost)
}

// unmountBusy unmounts, retrying while the mount is busy. Past the timeout
// it detaches the mount, which disappears from the namespace while the
// processes that use it keep their files, and serves them a while longer.
func unmountBusy(srv *fusefs.Server, gone <-chan struct{}, timeout time.Duration, log *slog.Logger) error {
	deadline := time.Now().Add(timeout)
	for {
		err := srv.Unmount()
		if err == nil || !errors.Is(err, syscall.EBUSY) {
			return err
		}
		if time.Now().After(deadline) {
			log.Warn("Mount still busy; detaching it", "mountpoint", srv.Dir())
			_ = syscall.Unmount(srv.Dir(), syscall.MNT_DETACH)
			select {
			case <-gone:
				return nil
			case <-time.After(timeout):
				return fmt.Errorf("mount %s stayed in use after it was detached: %w", srv.Dir(), err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func connectClient(ctx context.Context, opts client.Options) (*client.FS, error) {
	c, err := client.New(opts)
	if err != nil {
		return nil, badInput("%w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Connect(cctx); err != nil {
		_ = c.Close()
		if errors.Is(err, client.ErrMisconfigured) {
			return nil, badInput("%w", err)
		}
		return nil, withCode(exitUnreachable, fmt.Errorf("reaching the cache servers: %w", err))
	}
	return c, nil
}

// raiseReadahead sets the kernel's readahead for the mount to n bytes. A
// FUSE mount starts with the default of 128 KiB, and the file system cannot
// ask for more at INIT; the mount's backing device info can be changed
// afterwards, which turns sequential reads into 1 MiB requests (one extent,
// one server call) instead of eight of 128 KiB.
func raiseReadahead(mountpoint string, n int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(mountpoint, &st); err != nil {
		return err
	}
	major, minor := (st.Dev>>8)&0xfff, (st.Dev&0xff)|((st.Dev>>12)&0xfff00)
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	return os.WriteFile(p, []byte(strconv.Itoa(n>>10)), 0)
}

// checkMountpoint returns the absolute mount point if it is a directory
// that nothing is mounted on.
func checkMountpoint(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", badInput("mount point: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", badInput("mount point: %w", err)
	}
	if !fi.IsDir() {
		return "", badInput("mount point %s is not a directory", abs)
	}
	mounted, err := isMountpoint(abs)
	if err != nil {
		return "", err
	}
	if mounted {
		return "", withCode(exitMountBusy, fmt.Errorf("mount point %s is already in use by another mount", abs))
	}
	return abs, nil
}

// isMountpoint reports whether something is mounted on dir, from
// /proc/self/mountinfo.
func isMountpoint(dir string) (bool, error) {
	fd, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer fd.Close()
	sc := bufio.NewScanner(fd)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMount(fields[4]) == dir {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMount undoes the octal escapes of spaces and the like in
// mountinfo paths.
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// initialPIDNamespace is how /proc/self/ns/pid reads in the host's pid
// namespace: the kernel gives that namespace a fixed inode number
// (PROC_PID_INIT_INO).
const initialPIDNamespace = "pid:[4026531836]"

// inInitialPIDNamespace reports whether the process runs in the host's pid
// namespace, where the kernel gives a FUSE daemon the pid of every caller.
// A daemon in a namespace of its own gets pid 0 for callers outside it.
func inInitialPIDNamespace() bool {
	ns, err := os.Readlink("/proc/self/ns/pid")
	return err != nil || ns == initialPIDNamespace
}
