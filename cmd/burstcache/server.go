package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/durable"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/posixns"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

type serverFlags struct {
	listen, control, backing, cacheDir string
	backingBeneath                     string
	instance, secretFile, durability   string
	accessMode                         string
	readyFile                          string
	capacity, extentSize, maxFileSize  sizeFlag
	index, servers                     int
	uid, gid                           int
	groups                             []uint
	actAsCaller, refuseUnaddressed     bool
	callerUIDs, callerGIDs             rangesFlag
	dirtyHigh, dirtyLow                int
	evictHigh, evictLow, threads       int
	maxFiles                           int64
	windowMultiplier                   float64
	windowLength                       time.Duration
	commitInterval                     time.Duration
	backingReadLatency                 time.Duration
	mountPublicKeys                    []string
}

func newServerCmd() *cobra.Command {
	f := &serverFlags{extentSize: 1 << 20}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a cache server: one engine over a backing directory, served to mounts",
		Long: `server runs cache server INDEX of an instance of N servers. It keeps
extents of the files of the backing directory in the cache directory, serves
them over the data-path protocol on --listen, and serves the control API
(flush, drain, statistics, tunables) on --control. Backing-store operations
run as --uid/--gid/--groups (default: the server process), or, with
--act-as-caller (root only), as the process that made each request, which
--caller-uids and --caller-gids can restrict to the ids an administrator
mapped (root, the mount's own identity, always passes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServer(cmd.Context(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7070", "data-path address: host:port, or the absolute path of a Unix domain socket")
	fl.StringVar(&f.control, "control", "127.0.0.1:7071", "control API address")
	fl.StringVar(&f.backing, "backing", "", "backing directory (the parallel file system)")
	fl.StringVar(&f.backingBeneath, "backing-beneath", "", "directory that the backing directory must stay beneath once its symbolic links are followed, such as the path prefix an instance was granted (default: none)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "cache directory on local SSD")
	fl.Var(&f.capacity, "capacity", "cache capacity, such as 10Gi")
	fl.Var(&f.extentSize, "extent-size", "striping and caching unit")
	fl.IntVar(&f.index, "index", 0, "index of this server in the instance")
	fl.IntVar(&f.servers, "servers", 1, "number of servers in the instance")
	fl.StringVar(&f.instance, "instance", "", "instance name recorded in the cache directory (default: derived from --backing)")
	fl.IntVar(&f.uid, "uid", -1, "uid of backing-store operations")
	fl.IntVar(&f.gid, "gid", -1, "gid of backing-store operations")
	fl.UintSliceVar(&f.groups, "groups", nil, "supplementary groups of backing-store operations")
	fl.BoolVar(&f.actAsCaller, "act-as-caller", false, "run backing-store operations as the calling process (root only; needs --secret-file)")
	fl.Var(&f.callerUIDs, "caller-uids", "with --act-as-caller, the uids callers may have, such as 0,1000-1999; others are refused (default: any)")
	fl.Var(&f.callerGIDs, "caller-gids", "with --act-as-caller, the gids callers may have; others are refused, and supplementary groups outside them are not used (default: any)")
	fl.StringVar(&f.secretFile, "secret-file", "", "file holding the secret clients must prove they know")
	fl.StringSliceVar(&f.mountPublicKeys, "mount-public-key", nil, "admit only data-path clients that also sign with the private half of this public mount key (base64; repeat, or separate with commas, to admit several): mounts of the node plugin, not whoever can read the shared secret (needs --secret-file)")
	fl.BoolVar(&f.refuseUnaddressed, "refuse-unaddressed-calls", false, "refuse control calls whose signature does not name this server (--index), those of callers of earlier releases, so that a call seen on its way to another server of the instance cannot be sent to this one")
	fl.StringVar(&f.accessMode, "access-mode", "Striped", "Striped (extents spread over the servers) or LoadBalanced (read-only, whole files on every server)")
	fl.StringVar(&f.durability, "durability", "Cache", "what fsync guarantees: Cache (on SSD) or Backing (written back)")
	fl.IntVar(&f.dirtyHigh, "dirty-high", 0, "write-back starts past this percentage of capacity dirty (default 50)")
	fl.IntVar(&f.dirtyLow, "dirty-low", 0, "write-back stops at this percentage (default 25)")
	fl.IntVar(&f.evictHigh, "evict-high", 0, "eviction starts past this percentage of capacity used (default 95)")
	fl.IntVar(&f.evictLow, "evict-low", 0, "eviction stops at this percentage (default 85)")
	fl.IntVar(&f.threads, "writeback-threads", 0, "write-back workers (default 4)")
	fl.Var(&f.maxFileSize, "max-file-size", "largest file size; writes past it fail with EFBIG (0: no limit)")
	fl.Int64Var(&f.maxFiles, "max-files", 0, "most files the instance holds, over all its servers; more fail with EDQUOT (0: no limit)")
	fl.Float64Var(&f.windowMultiplier, "write-window-multiplier", 0, "at most this times the capacity may be written per write window; past it writes fail with EROFS (default 10, negative: no limit)")
	fl.DurationVar(&f.windowLength, "write-window-length", 0, "length of the sliding write window (default 24h)")
	fl.DurationVar(&f.commitInterval, "commit-interval", 0, "longest wait of index changes for a commit: what a crash of the server can lose of writes to files still open that no fsync covered (default 1s)")
	fl.StringVar(&f.readyFile, "ready-file", "", "write the addresses served, as JSON, to this file once serving")
	fl.DurationVar(&f.backingReadLatency, "backing-read-latency", 0, "delay every read of the backing directory by this long, as a slow parallel file system would")
	// Tests use it to watch long copy-ups on small files; nobody else needs it.
	_ = fl.MarkHidden("backing-read-latency")
	return cmd
}

// readyInfo is what a server writes to --ready-file once it serves. The
// data address may be a socket in a directory whose name is not UTF-8.
type readyInfo struct {
	Data    control.Path `json:"data"`
	Control string       `json:"control"`
	PID     int          `json:"pid"`
}

func runServer(ctx context.Context, f *serverFlags) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cred, err := f.credential()
	if err != nil {
		return err
	}
	if err := f.validate(cred); err != nil {
		return err
	}
	secret, err := readSecret(f.secretFile)
	if err != nil {
		return err
	}
	mountKeys, err := f.parseMountKeys()
	if err != nil {
		return err
	}
	ns, store, err := f.openBacking()
	if err != nil {
		return err
	}
	defer func() { _ = ns.Close(); _ = store.Close() }()
	cache, eng, err := f.openEngine(log, f.slowed(store))
	if err != nil {
		return err
	}
	defer func() { _ = eng.Close() }() // after retire, a no-op (ErrClosed)
	data, ctl, err := f.listeners()
	if err != nil {
		return err
	}
	s, err := server.New(server.Config{
		Cache: cache, NS: ns, Cred: cred, ActAsCaller: f.actAsCaller, Secret: secret, MountKeys: mountKeys, Log: log,
		CallerUIDs: f.callerUIDs.ranges, CallerGIDs: f.callerGIDs.ranges,
		Incarnation:            eng.Incarnation(),
		LoadBalanced:           f.accessMode == "LoadBalanced",
		HiddenNames:            filepath.Join(f.cacheDir, server.HiddenNamesFile),
		ServedCalls:            filepath.Join(f.cacheDir, server.ServedCallsFile),
		RefuseUnaddressedCalls: f.refuseUnaddressed,
		Info: control.ServerInfo{
			Instance: f.instanceName(), Index: f.index, Servers: f.servers, ExtentSize: int64(f.extentSize),
			DataAddress: data.Addr().String(), Backing: absPath(f.backing), Durability: f.durability,
		},
	})
	if err != nil {
		return err
	}
	if err := serveUntilSignal(ctx, s, data, ctl, f.readyFile, log); err != nil {
		return err
	}
	return retire(eng, s.Drained(), s.Discarded(), log)
}

// retire ends the engine of a server stopped by a signal. A server that
// was drained (the teardown of its instance drains it before deleting its
// pod) and closed with nothing dirty holds nothing the backing store lacks:
// it removes its slab and index, which would otherwise keep their
// preallocated space on the node for good. So does a server told to
// discard (a teardown that goes past unwritten data, as the instance's
// owner asked), dirty data included. Any other server keeps them, for a
// restart to recover.
func retire(eng *engine.Engine, drained, discarded bool, log *slog.Logger) error {
	err := eng.Close()
	st := eng.Stats()
	dir := filepath.Dir(eng.SlabFile())
	// The log of hidden names goes with the cache files: the teardown
	// that drained or discarded the server is over.
	hidden := filepath.Join(filepath.Dir(dir), server.HiddenNamesFile)
	if discarded {
		if err := errors.Join(os.RemoveAll(dir), os.RemoveAll(hidden)); err != nil {
			return fmt.Errorf("removing the cache files of a discarded server: %w", err)
		}
		log.Warn("Removed the cache files of a discarded server", "dir", dir, "droppedDirtyBytes", st.DirtyBytes)
		return nil
	}
	if !spent(drained, st) {
		log.Info("Keeping the cache files", "drained", drained, "dirtyBytes", st.DirtyBytes, "closeErr", err)
		return err
	}
	if err := errors.Join(os.RemoveAll(dir), os.RemoveAll(hidden)); err != nil {
		return fmt.Errorf("removing the cache files of a drained server: %w", err)
	}
	log.Info("Removed the cache files of a drained server with nothing dirty", "dir", dir, "closeErr", err, "cacheDeviceError", st.DeviceError)
	return nil
}

// spent reports whether the cache files of a server whose engine closed
// hold nothing the backing store lacks: the server was drained and nothing
// is dirty, which write-back says only of data the backing store fsynced.
// That holds whatever error the close returned. A last commit that failed
// (a failed cache device, a full disk) leaves the index as of the commit
// before: kept, it would have a start over the directory write extents
// back again that were written back, over whatever the backing store holds
// by then.
func spent(drained bool, st engine.Stats) bool {
	return drained && st.DirtyExtents == 0 && st.DirtyBytes == 0
}

func serveUntilSignal(ctx context.Context, s *server.Server, data, ctl net.Listener, readyFile string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(data, ctl) }()
	if readyFile != "" {
		info := readyInfo{Data: control.Path(data.Addr().String()), Control: ctl.Addr().String(), PID: os.Getpid()}
		if err := writeJSONFile(readyFile, info); err != nil {
			return err
		}
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("Stopping on signal")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Shutdown(sctx)
	if errors.Is(err, wire.ErrRequestsCancelled) {
		// Their clients were gone already, and none had an answer: the
		// engine holds all it acknowledged, and closes as usual.
		log.Warn("Cancelled the requests still being served at the end of the shutdown", "timeout", 10*time.Second)
		err = nil
	}
	return err
}

// credential returns the identity of backing-store operations.
func (f *serverFlags) credential() (ident.Cred, error) {
	cred := ident.Process()
	if f.uid < 0 && f.gid < 0 && f.groups == nil {
		return cred, nil
	}
	if f.uid >= 0 {
		cred.UID = uint32(f.uid)
	}
	if f.gid >= 0 {
		cred.GID = uint32(f.gid)
	}
	cred.Groups = nil
	for _, g := range f.groups {
		cred.Groups = append(cred.Groups, uint32(g))
	}
	if os.Geteuid() != 0 && (cred.UID != uint32(os.Geteuid()) || cred.GID != uint32(os.Getegid())) {
		return cred, badInput("--uid and --gid other than the server's own need the server to run as root")
	}
	return cred, nil
}

func (f *serverFlags) validate(cred ident.Cred) error {
	switch {
	case f.backing == "" || f.cacheDir == "":
		return badInput("--backing and --cache-dir are required")
	case f.servers < 1 || f.index < 0 || f.index >= f.servers:
		return badInput("--index %d is not a server of --servers %d", f.index, f.servers)
	case f.capacity <= 0:
		return badInput("--capacity is required")
	case f.actAsCaller && os.Geteuid() != 0:
		return badInput("--act-as-caller needs the server to run as root")
	case !f.actAsCaller && (f.callerUIDs.ranges != nil || f.callerGIDs.ranges != nil):
		return badInput("--caller-uids and --caller-gids need --act-as-caller")
	case f.actAsCaller && f.secretFile == "":
		return badInput("--act-as-caller trusts the identity clients send, so it needs --secret-file")
	case len(f.mountPublicKeys) > 0 && f.secretFile == "":
		return badInput("--mount-public-key adds to the proof of the shared secret, so it needs --secret-file")
	case f.accessMode != "Striped" && f.accessMode != "LoadBalanced":
		return badInput("--access-mode %q: want Striped or LoadBalanced", f.accessMode)
	case f.durability != string(engine.Cache) && f.durability != string(engine.Backing):
		return badInput("--durability %q: want Cache or Backing", f.durability)
	}
	if err := checkApart(flagDir{"--backing", f.backing}, flagDir{"--cache-dir", f.cacheDir}); err != nil {
		return err
	}
	return checkBacking(f.backing, cred)
}

// checkBacking checks that dir is a directory the identity can list.
func checkBacking(dir string, cred ident.Cred) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return badInput("backing directory: %w", err)
	}
	if !fi.IsDir() {
		return badInput("backing directory %s is not a directory", dir)
	}
	err = ident.Do(cred, func() error {
		_, err := os.ReadDir(dir)
		return err
	})
	if err != nil {
		return badInput("backing directory %s cannot be read as %s: %w", dir, cred, err)
	}
	return nil
}

func (f *serverFlags) instanceName() string {
	if f.instance != "" {
		return f.instance
	}
	return "local:" + absPath(f.backing)
}

// absPath returns p made absolute, or p if that fails.
func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func (f *serverFlags) tunables() engine.Tunables {
	return engine.Tunables{
		WriteBackThreads: f.threads, DirtyHigh: f.dirtyHigh, DirtyLow: f.dirtyLow,
		EvictHigh: f.evictHigh, EvictLow: f.evictLow,
		MaxFileSize: int64(f.maxFileSize), MaxFiles: f.maxFiles,
		WriteWindow: engine.WriteWindow{Multiplier: f.windowMultiplier, Length: f.windowLength},
	}
}

// openBacking opens the backing directory once, for the namespace and the
// engine's store alike, so that both keep serving the same directory
// whatever its path names later.
func (f *serverFlags) openBacking() (*posixns.FS, *backing.Dir, error) {
	root, err := openBeneath(f.backingBeneath, f.backing)
	if err != nil {
		return nil, nil, badInput("backing directory: %w", err)
	}
	defer func() { _ = root.Close() }()
	ns, err := posixns.NewAt(f.backing, root)
	if err != nil {
		return nil, nil, badInput("backing directory: %w", err)
	}
	store, err := backing.OpenDir(f.backing, root)
	if err != nil {
		_ = ns.Close()
		return nil, nil, badInput("backing directory: %w", err)
	}
	return ns, store, nil
}

func (f *serverFlags) openEngine(log *slog.Logger, store backing.Store) (server.Cache, *engine.Engine, error) {
	id := server.Identity{Instance: control.Path(f.instanceName()), Index: f.index, Servers: f.servers, ExtentSize: int64(f.extentSize)}
	dir, err := server.ClaimCacheDir(f.cacheDir, id)
	if errors.Is(err, server.ErrForeignCacheDir) {
		return nil, nil, withCode(exitForeignCacheDir, err)
	}
	if err != nil {
		return nil, nil, badInput("cache directory: %w", err)
	}
	tun := f.tunables()
	e, err := engine.Open(engine.Config{
		Dir: dir, Backing: store, ExtentSize: int64(f.extentSize),
		Capacity: int64(f.capacity), Tunables: tun, Durability: engine.Durability(f.durability), Logger: log,
		Stride: f.stride(), CommitInterval: f.commitInterval, Share: server.FileShare(id),
	})
	if errors.Is(err, engine.ErrGeometry) || errors.Is(err, engine.ErrInUse) {
		return nil, nil, withCode(exitForeignCacheDir, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("opening the cache: %w", err)
	}
	return server.EngineCache(e, tun), e, nil
}

// slowed is the backing directory as the engine reads and writes it,
// slowed down as --backing-read-latency asks.
func (f *serverFlags) slowed(dir *backing.Dir) backing.Store {
	if f.backingReadLatency <= 0 {
		return dir
	}
	slow := backing.NewFaulty(dir)
	slow.SetLatency(backing.OpReadAt, f.backingReadLatency)
	slow.SetLatency(backing.OpCopyRange, f.backingReadLatency)
	return slow
}

func (f *serverFlags) listeners() (net.Listener, net.Listener, error) {
	data, err := wire.Listen(f.listen)
	if err != nil {
		return nil, nil, badInput("--listen: %w", err)
	}
	ctl, err := net.Listen("tcp", f.control)
	if err != nil {
		_ = data.Close()
		return nil, nil, badInput("--control: %w", err)
	}
	return data, ctl, nil
}

// parseMountKeys reads the public mount keys of --mount-public-key.
func (f *serverFlags) parseMountKeys() ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, s := range f.mountPublicKeys {
		k, err := control.ParseMountPublicKey(s)
		if err != nil {
			return nil, badInput("--mount-public-key: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// readSecret reads the shared secret from path; an empty path means none.
func readSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, badInput("--secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, badInput("--secret-file %s is empty", path)
	}
	return []byte(s), nil
}

// writeJSONFile writes v to path durably: a crash leaves the old file or
// the new one, whole.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(path, append(b, '\n'), 0o600)
}

// stride is the distance between the extents of a file that this server
// holds: every Nth in a striped instance, every one when each server holds
// whole files.
func (f *serverFlags) stride() int64 {
	if f.accessMode == "LoadBalanced" || f.servers < 1 {
		return 1
	}
	return int64(f.servers)
}

// rangesFlag is a flag of id ranges, such as 0,1000-1999.
type rangesFlag struct{ ranges ident.Ranges }

func (r *rangesFlag) String() string { return r.ranges.String() }

func (r *rangesFlag) Set(s string) error {
	rs, err := ident.ParseRanges(s)
	if err != nil {
		return err
	}
	r.ranges = rs
	return nil
}

func (r *rangesFlag) Type() string { return "ranges" }
