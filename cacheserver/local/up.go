package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// ErrCacheDirInUse is returned by Up for a cache directory that holds
// another instance.
var ErrCacheDirInUse = errors.New("cache directory belongs to another instance")

// Config says what instance Up starts.
type Config struct {
	// Binary is the burstcache executable to run the servers and the mount.
	Binary string
	// Backing and Mount are absolute directories.
	Backing, Mount string
	// CacheDir holds the servers' caches and the state; DefaultCacheDir if
	// empty.
	CacheDir string
	// Servers is the number of servers (default 1).
	Servers int
	// Capacity is the total cache capacity, shared equally by the servers.
	Capacity int64
	// ExtentSize is the striping unit (default 1 MiB).
	ExtentSize int64
	// UID and GID, when not negative, are the identity of backing-store
	// operations.
	UID, GID int
	// ActAsCaller makes the servers run backing-store operations as the
	// calling process (the servers must run as root).
	ActAsCaller bool
	// ServerArgs are passed to every server, such as watermark flags.
	ServerArgs []string
	// ClientCache has the mount keep data in the kernel's page cache and
	// write-back cache (see fusefs.Options).
	ClientCache bool
	// Timeout bounds each process's start (default 30 s).
	Timeout time.Duration
}

func (c *Config) defaults() {
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir(c.Mount)
	}
	c.Servers = max(c.Servers, 1)
	if c.ExtentSize <= 0 {
		c.ExtentSize = 1 << 20
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
}

// Up starts the instance, or the parts of it that are not running, and
// returns once the mount serves.
func Up(ctx context.Context, cfg Config) (*State, error) {
	cfg.defaults()
	st, err := loadDir(cfg.CacheDir)
	switch {
	case errors.Is(err, ErrNotUp):
		st, err = fresh(cfg)
	case err == nil && st.Mount != cfg.Mount:
		return nil, fmt.Errorf("%w: %s holds the instance mounted at %s", ErrCacheDirInUse, cfg.CacheDir, st.Mount)
	case err == nil && st.Backing != cfg.Backing:
		return nil, fmt.Errorf("%w: %s holds an instance of %s", ErrCacheDirInUse, cfg.CacheDir, st.Backing)
	case err == nil:
		// The servers start again as they were (see Settings), whatever
		// cfg says; the mount must check each walk as its caller exactly
		// when they act as each caller.
		cfg.ActAsCaller = st.Settings().ActAsCaller
	}
	if err != nil {
		return nil, err
	}
	isFresh := st.MountPID == 0 && st.Servers[0].PID == 0
	if err := bringUp(ctx, cfg, st); err != nil {
		// Leave nothing running or mounted. A fresh instance has no data
		// yet and is forgotten; an old one keeps its state, so that its
		// servers' dirty data is found again by the next Up.
		stopAll(cfg.Binary, st)
		if isFresh {
			_ = st.forget()
		}
		return nil, err
	}
	return st, nil
}

func bringUp(ctx context.Context, cfg Config, st *State) error {
	if err := startServers(ctx, cfg, st); err != nil {
		return err
	}
	if err := st.save(); err != nil {
		return err
	}
	if alive(st.MountPID, st.MountStart, cfg.Binary) {
		return nil
	}
	if st.MountPID != 0 && mounted(st.Mount) {
		// The mount process died and left its mount behind, answering
		// ENOTCONN: detach it and mount again.
		if err := syscall.Unmount(st.Mount, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("detaching the dead mount %s: %w", st.Mount, err)
		}
	}
	if err := startMount(ctx, cfg, st); err != nil {
		return err
	}
	return st.save()
}

// fresh prepares the cache directory and the state of a new instance.
func fresh(cfg Config) (*State, error) {
	if err := os.MkdirAll(filepath.Join(cfg.CacheDir, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("creating cache directory: %w", err)
	}
	if err := writeSecret(secretPath(cfg.CacheDir)); err != nil {
		return nil, err
	}
	st := &State{Backing: cfg.Backing, Mount: cfg.Mount, CacheDir: cfg.CacheDir, ExtentSize: cfg.ExtentSize}
	per := cfg.Capacity / int64(cfg.Servers)
	for i := range cfg.Servers {
		args := []string{"server",
			"--listen", dataAddress(cfg.CacheDir, i), "--control", "127.0.0.1:0",
			"--backing", cfg.Backing, "--cache-dir", filepath.Join(cfg.CacheDir, "server-"+strconv.Itoa(i)),
			"--capacity", strconv.FormatInt(per, 10), "--extent-size", strconv.FormatInt(cfg.ExtentSize, 10),
			"--index", strconv.Itoa(i), "--servers", strconv.Itoa(cfg.Servers),
			"--secret-file", secretPath(cfg.CacheDir),
		}
		if cfg.UID >= 0 {
			args = append(args, "--uid", strconv.Itoa(cfg.UID))
		}
		if cfg.GID >= 0 {
			args = append(args, "--gid", strconv.Itoa(cfg.GID))
		}
		if cfg.ActAsCaller {
			args = append(args, "--act-as-caller")
		}
		// The callers of this instance are the local commands of this
		// release, which name the server they call: a call seen on its
		// way to one server must not be served by another.
		args = append(args, refuseUnaddressed)
		st.Servers = append(st.Servers, ServerState{Index: i, Args: append(args, cfg.ServerArgs...)})
	}
	return st, nil
}

// maxSocketPath is the longest path of a Unix domain socket (sun_path holds
// 108 bytes with the terminating NUL).
const maxSocketPath = 107

// dataAddress is where server i serves the data path: a Unix domain socket
// in the cache directory, which the mount on this machine reaches without
// the TCP stack, or loopback TCP if the path is too long for a socket or
// cannot go in the mount's --servers, a comma-separated list read as CSV,
// which splits a path at a comma and cuts it at a quote or a newline.
func dataAddress(cacheDir string, i int) string {
	p, err := filepath.Abs(filepath.Join(cacheDir, fmt.Sprintf("server-%d.sock", i)))
	if err != nil || len(p) > maxSocketPath || strings.ContainsAny(p, ",\"\r\n") {
		return "127.0.0.1:0"
	}
	return p
}

func writeSecret(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	b := make([]byte, 32)
	rand.Read(b)
	if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing the secret: %w", err)
	}
	return nil
}

// startServers starts every server that is not running. A server that ran
// before is started on the addresses it had, which the mount knows.
func startServers(ctx context.Context, cfg Config, st *State) error {
	for i := range st.Servers {
		s := &st.Servers[i]
		if alive(s.PID, s.Start, cfg.Binary) {
			continue
		}
		if err := startServer(ctx, cfg, st, s); err != nil {
			return err
		}
	}
	return nil
}

func startServer(ctx context.Context, cfg Config, st *State, s *ServerState) error {
	ready := filepath.Join(st.CacheDir, fmt.Sprintf("server-%d.ready", s.Index))
	_ = os.Remove(ready)
	args := append(pinned(s), "--ready-file", ready)
	what := fmt.Sprintf("server %d", s.Index)
	c, err := start(what, cfg.Binary, args, filepath.Join(st.CacheDir, "logs", fmt.Sprintf("server-%d.log", s.Index)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var info struct {
		Data    control.Path
		Control string
	}
	err = c.waitReady(ctx, func() bool { return readJSON(ready, &info) == nil })
	if err != nil {
		return err
	}
	s.PID, s.Data, s.Control = c.cmd.Process.Pid, string(info.Data), info.Control
	s.Start = startTime(s.PID)
	s.ControlProtocol = control.CurrentProtocol
	return nil
}

// pinned returns the server's arguments with the addresses it had, if any.
func pinned(s *ServerState) []string {
	args := append([]string(nil), s.Args...)
	for i := 0; i+1 < len(args); i++ {
		switch {
		case args[i] == "--listen" && s.Data != "":
			args[i+1] = s.Data
		case args[i] == "--control" && s.Control != "":
			args[i+1] = s.Control
		}
	}
	return args
}

func startMount(ctx context.Context, cfg Config, st *State) error {
	var addrs []string
	for _, s := range st.Servers {
		addrs = append(addrs, s.Data)
	}
	ready, exit := filepath.Join(st.CacheDir, "mount.ready"), mountExitPath(st.CacheDir)
	_ = os.Remove(ready)
	// What an earlier mount recorded of its end is not this one's.
	_ = os.Remove(exit)
	args := []string{"mount", "--servers", strings.Join(addrs, ","),
		"--secret-file", secretPath(st.CacheDir),
		"--extent-size", strconv.FormatInt(st.ExtentSize, 10), "--ready-file", ready, "--exit-file", exit}
	if cfg.ClientCache {
		args = append(args, "--client-cache")
	}
	if cfg.ActAsCaller {
		args = append(args, "--per-caller")
	}
	args = append(args, st.Mount)
	c, err := start("mount", cfg.Binary, args, filepath.Join(st.CacheDir, "logs", "mount.log"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	err = c.waitReady(ctx, func() bool {
		_, err := os.Stat(ready)
		return !errors.Is(err, fs.ErrNotExist)
	})
	if err != nil {
		return err
	}
	st.MountPID, st.MountArgs = c.cmd.Process.Pid, args
	st.MountStart = startTime(st.MountPID)
	return nil
}
