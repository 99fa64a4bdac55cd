package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// mountOptions are the FUSE options every FUSE target here uses, so that the
// passthrough baseline and burstcache pay for the same kernel settings.
func mountOptions(name string) *fs.Options {
	sec := time.Second
	return &fs.Options{
		EntryTimeout: &sec,
		AttrTimeout:  &sec,
		MountOptions: fuse.MountOptions{
			FsName:       name,
			Name:         "bench",
			MaxWrite:     1 << 20,
			MaxReadAhead: 1 << 20,
			AllowOther:   true,
			DirectMount:  true,
		},
	}
}

// mountLoopback mounts a bare go-fuse loopback of dir at mnt.
func mountLoopback(dir, mnt string) (*fuse.Server, error) {
	root, err := fs.NewLoopbackRoot(dir)
	if err != nil {
		return nil, err
	}
	return fs.Mount(mnt, root, mountOptions("passthrough"))
}

// burstcache drives a standalone cache through the burstcache binary.
type burstcache struct {
	bin         string
	mnt         string
	servers     int
	capacity    string
	clientCache bool
}

func (b *burstcache) run(args ...string) error {
	cmd := exec.Command(b.bin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("burstcache %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (b *burstcache) up(backing, cacheDir string) error {
	args := []string{"local", "up", "--backing", backing, "--mount", b.mnt, "--cache-dir", cacheDir,
		"--servers", fmt.Sprint(b.servers), "--capacity", b.capacity}
	if b.clientCache {
		args = append(args, "--client-cache")
	}
	return b.run(args...)
}

func (b *burstcache) down() error { return b.run("local", "down", "--mount", b.mnt) }

// writeBack writes back every dirty byte, so that a measurement starts from
// a cache that earlier workloads left clean: dirty data they left would
// push the cache past its dirty high watermark, where write-back runs at
// full speed whatever the workload does, and the numbers would depend on
// the order of the workloads.
func (b *burstcache) writeBack() error { return b.run("local", "flush", "--mount", b.mnt, b.mnt) }

// flushAsync starts writing back everything under path (a path in the
// mount), for measuring a workload while write-back runs. The returned
// function waits for it.
func (b *burstcache) flushAsync(path string) func() error {
	cmd := exec.Command(b.bin, "local", "flush", "--mount", b.mnt, path)
	if err := cmd.Start(); err != nil {
		return func() error { return err }
	}
	return cmd.Wait
}

// dropCaches writes dirty pages and drops the kernel's page, dentry and inode
// caches, so a timed read reads from the medium and not from memory. It needs
// root; without it the numbers include the page cache, and the report says so.
func dropCaches() bool {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) == nil
}

const (
	pipeMaxSize = "/proc/sys/fs/pipe-max-size"
	// restoreEnv carries the limit to restore into the re-executed process.
	restoreEnv = "BURSTCACHE_BENCH_PIPE_MAX_SIZE"
)

// raisePipeSize lets go-fuse splice 1 MiB reads: a reply is 1 MiB plus a
// header, and with the default limit of 1 MiB every such splice falls back to
// a copy. go-fuse reads the limit once, when the process starts, so after
// raising it the process executes itself again. It returns a function that
// restores the old limit, to be deferred by the re-executed process.
func raisePipeSize() (restore func(), err error) {
	if old := os.Getenv(restoreEnv); old != "" {
		return func() { _ = os.WriteFile(pipeMaxSize, []byte(old), 0) }, nil
	}
	old, err := os.ReadFile(pipeMaxSize)
	if err != nil {
		return func() {}, nil
	}
	var n int
	if _, err := fmt.Sscan(string(old), &n); err != nil || n >= 4<<20 {
		return func() {}, nil
	}
	if err := os.WriteFile(pipeMaxSize, []byte("4194304"), 0); err != nil {
		return func() {}, nil // not root: measure with copies, as a user would get
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), restoreEnv+"="+strings.TrimSpace(string(old)))
	return nil, syscall.Exec(exe, os.Args, env)
}

// unmount detaches a FUSE mount, lazily if it is busy.
func unmount(srv *fuse.Server, mnt string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Unmount() }()
	select {
	case err := <-done:
		if err == nil {
			return
		}
	case <-ctx.Done():
	}
	_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
}

func mkdirs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func scratch(base, name string) string { return filepath.Join(base, name+"."+unique()) }
