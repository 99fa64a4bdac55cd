package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
)

const (
	// pipeMaxSize is the system-wide limit on the size of a pipe.
	pipeMaxSize = "/proc/sys/fs/pipe-max-size"
	// splicePipeSize lets go-fuse splice a 1 MiB read reply, with its
	// header, through one pipe; at the kernel's default limit of 1 MiB every
	// such reply falls back to a copy.
	splicePipeSize = 4 << 20
	// pipeRaisedEnv marks a mount process that raised the limit and
	// executed itself again, so that it does not try twice.
	pipeRaisedEnv = "BURSTCACHE_PIPE_RAISED"
)

// raisePipeLimit raises the system-wide pipe size limit in the file at path
// to at least want, and reports whether it changed it. It never lowers it.
func raisePipeLimit(path string, want int) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if cur >= want {
		return false, nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0); err != nil {
		return false, err
	}
	return true, nil
}

// spliceWholeReads makes sure the mount can splice 1 MiB read replies.
// go-fuse learns the pipe size limit when the process starts, so after
// raising it the process executes itself again; it returns only when the
// limit needs no change or cannot be changed (not root, a read-only
// /proc/sys), in which case reads are copied, and it says so.
func spliceWholeReads(log *slog.Logger) {
	if os.Getenv(pipeRaisedEnv) != "" {
		return
	}
	raised, err := raisePipeLimit(pipeMaxSize, splicePipeSize)
	if err != nil {
		log.Info("Cannot raise the pipe size limit; 1 MiB reads are copied rather than spliced", "file", pipeMaxSize, "err", err)
		return
	}
	if !raised {
		return
	}
	log.Info("Raised the system's pipe size limit so that 1 MiB reads can be spliced", "file", pipeMaxSize, "bytes", splicePipeSize)
	exe, err := os.Executable()
	if err != nil {
		return
	}
	err = syscall.Exec(exe, os.Args, append(os.Environ(), pipeRaisedEnv+"=1"))
	log.Warn("Executing the mount again failed; 1 MiB reads are copied until it restarts", "err", err)
}
