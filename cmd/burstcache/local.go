package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/local"
)

func newLocalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run a cache instance on this machine, without Kubernetes",
		Long: `local starts cache servers and a FUSE mount of a backing directory on this
machine, reports on them, sends them hints, and tears them down after writing
every dirty byte back. Exit codes: 2 bad input, 3 cache directory of another
instance, 4 mount point in use, 5 server unreachable, 6 write-back incomplete,
7 the mount could not make durable or publish all it was given.`,
	}
	cmd.AddCommand(newLocalUpCmd(), newLocalDownCmd(), newLocalStatusCmd())
	for _, name := range []string{"flush", "evict", "invalidate", "preload"} {
		cmd.AddCommand(newLocalHintCmd(name))
	}
	return cmd
}

func newLocalUpCmd() *cobra.Command {
	cfg := local.Config{UID: -1, GID: -1}
	capacity, extent := sizeFlag(1<<30), sizeFlag(1<<20)
	cmd := &cobra.Command{
		Use:   "up --backing DIR --mount DIR",
		Short: "Start servers and a mount in the background; return when the mount serves",
		Long: `up starts servers and a mount in the background and returns when the mount
serves. Over a cache directory that holds an instance (one whose down could not
write everything back, or that crashed), it starts the dead servers again with
the settings they were started with, to recover their data: --servers,
--capacity, --extent-size, --uid, --gid, --act-as-caller and --server-arg may
then be left out, or given with the same values; a different value is refused.
A running mount is kept as it is, and --client-cache is held to it likewise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Capacity, cfg.ExtentSize = int64(capacity), int64(extent)
			return runLocalUp(cmd, cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Backing, "backing", "", "backing directory to cache")
	fl.StringVar(&cfg.Mount, "mount", "", "mount point")
	fl.IntVar(&cfg.Servers, "servers", 1, "number of cache servers")
	fl.StringVar(&cfg.CacheDir, "cache-dir", "", "cache directory (default /var/tmp/burstcache/<hash of the mount point>)")
	fl.Var(&capacity, "capacity", "total cache capacity, shared by the servers")
	fl.Var(&extent, "extent-size", "striping unit")
	fl.IntVar(&cfg.UID, "uid", -1, "uid of backing-store operations; only this uid and root may use the mount (default: as root, act as each caller)")
	fl.IntVar(&cfg.GID, "gid", -1, "gid of backing-store operations (default: this process's)")
	fl.BoolVar(&cfg.ActAsCaller, "act-as-caller", false, "run backing-store operations as the calling process, for a shared instance (root only; the default as root without --uid and --gid)")
	fl.StringSliceVar(&cfg.ServerArgs, "server-arg", nil, "extra flag for every server, such as --dirty-high=80")
	fl.BoolVar(&cfg.ClientCache, "client-cache", false, "have the mount use the kernel's page cache and write-back cache (no close-to-open consistency between mounts)")
	return cmd
}

func runLocalUp(cmd *cobra.Command, cfg local.Config) error {
	if cfg.Backing == "" || cfg.Mount == "" {
		return badInput("--backing and --mount are required")
	}
	if cfg.UID < 0 && cfg.GID < 0 && os.Geteuid() == 0 {
		// Root servers acting as root would give every user of the mount
		// root's access to the backing store; acting as each caller keeps
		// the permissions of the backing store for everyone.
		cfg.ActAsCaller = true
	}
	if cfg.Capacity/int64(max(cfg.Servers, 1)) < 2*cfg.ExtentSize {
		return badInput("--capacity %d is too small for %d servers of %d-byte extents", cfg.Capacity, cfg.Servers, cfg.ExtentSize)
	}
	var err error
	if cfg.Binary, err = os.Executable(); err != nil {
		return err
	}
	cfg.Backing, cfg.Mount = absPath(cfg.Backing), absPath(cfg.Mount)
	if cfg.CacheDir != "" {
		cfg.CacheDir = absPath(cfg.CacheDir)
	}
	if err := checkBacking(cfg.Backing, localCred(cfg)); err != nil {
		return err
	}
	cacheDir := cmp.Or(cfg.CacheDir, local.DefaultCacheDir(cfg.Mount))
	// A mount over the backing directory, or above it, hides it from the
	// servers, which reach it by its path for each caller and would come
	// back to the mount; one beneath it would show itself.
	if err := checkApart(flagDir{"--backing", cfg.Backing}, flagDir{"--mount", cfg.Mount}, flagDir{"--cache-dir", cacheDir}); err != nil {
		return err
	}
	if err := checkLocalMount(&cfg); err != nil {
		return err
	}
	if err := checkStoredSettings(cmd, cfg); err != nil {
		return err
	}
	st, err := local.Up(cmd.Context(), cfg)
	if err != nil {
		return childError(err)
	}
	_, _ = fmt.Fprintf(cmd.OutOrStdout(), "burstcache: %s serves %s through %d servers (cache %s)\n",
		st.Mount, st.Backing, len(st.Servers), st.CacheDir)
	return nil
}

// checkLocalMount accepts a mount point that nothing is mounted on, or the
// running instance's own mount (up then restarts its dead servers).
func checkLocalMount(cfg *local.Config) error {
	st, err := local.Load(cfg.Mount)
	if err != nil || !local.Mounted(st.Mount) {
		_, err := checkMountpoint(cfg.Mount)
		return err
	}
	if cfg.CacheDir != "" && cfg.CacheDir != st.CacheDir {
		return withCode(exitMountBusy, fmt.Errorf("mount point %s is already in use by the instance with cache directory %s", cfg.Mount, st.CacheDir))
	}
	cfg.CacheDir = st.CacheDir
	return nil
}

func localCred(cfg local.Config) ident.Cred {
	c := ident.Process()
	if cfg.UID >= 0 {
		c.UID, c.Groups = uint32(cfg.UID), nil
	}
	if cfg.GID >= 0 {
		c.GID = uint32(cfg.GID)
	}
	return c
}

// childError gives the error of a child process that failed to start the
// child's exit code.
func childError(err error) error {
	var ee *local.ExitError
	switch {
	case errors.As(err, &ee) && ee.Code > 1:
		return withCode(ee.Code, err)
	case errors.Is(err, local.ErrCacheDirInUse):
		return withCode(exitForeignCacheDir, err)
	}
	return err
}

func newLocalDownCmd() *cobra.Command {
	var mount string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down --mount DIR",
		Short: "Unmount, write every dirty byte back, and stop the servers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := loadLocal(mount)
			if err != nil {
				return err
			}
			bin, _ := os.Executable()
			err = local.Down(cmd.Context(), bin, st, timeout, cmd.ErrOrStderr())
			switch {
			case errors.Is(err, local.ErrWriteBack):
				return withCode(exitWriteBack, err)
			case errors.Is(err, local.ErrMountUnpublished):
				return withCode(exitUnpublished, err)
			}
			if err == nil {
				_, _ = fmt.Fprintf(cmd.OutOrStdout(), "burstcache: %s unmounted; every dirty byte is written back to %s\n", st.Mount, st.Backing)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&mount, "mount", "", "mount point of the instance")
	cmd.Flags().DurationVar(&timeout, "unmount-timeout", time.Minute, "how long the mount may take to stop")
	return cmd
}

func loadLocal(mount string) (*local.State, error) {
	if mount == "" {
		return nil, badInput("--mount is required")
	}
	st, err := local.Load(absPath(mount))
	if errors.Is(err, local.ErrNotUp) {
		return nil, badInput("%w", err)
	}
	return st, err
}

func newLocalStatusCmd() *cobra.Command {
	var mount string
	cmd := &cobra.Command{
		Use:   "status --mount DIR",
		Short: "Show servers, capacity, cached and dirty bytes, hit ratio and write-back lag",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := loadLocal(mount)
			if err != nil {
				return err
			}
			bin, _ := os.Executable()
			ss := local.Status(cmd.Context(), bin, st)
			local.PrintStatus(cmd.OutOrStdout(), st, local.Mounted(st.Mount), ss)
			for _, s := range ss {
				if s.Err != nil {
					return withCode(exitUnreachable, fmt.Errorf("server %d: %w", s.Index, s.Err))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&mount, "mount", "", "mount point of the instance")
	return cmd
}

func newLocalHintCmd(name string) *cobra.Command {
	var mount string
	cmd := &cobra.Command{
		Use:   name + " --mount DIR PATH",
		Short: strings.ToUpper(name[:1]) + name[1:] + " a file or directory on every server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := loadLocal(mount)
			if err != nil {
				return err
			}
			rel, err := relativePath(st.Mount, args[0])
			if err != nil {
				return err
			}
			return local.SendHint(cmd.Context(), st, local.Hints[name], rel)
		},
	}
	cmd.Flags().StringVar(&mount, "mount", "", "mount point of the instance")
	return cmd
}

// relativePath turns a path under the mount point (absolute, or relative to
// the working directory) into a path relative to the backing root.
func relativePath(mount, p string) (string, error) {
	rel, err := filepath.Rel(mount, absPath(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", badInput("%s is not under the mount point %s", p, mount)
	}
	if rel == "." {
		return "", nil
	}
	return filepath.ToSlash(rel), nil
}
