package mounter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process runs each daemon as a detached `burstcache mount` process: in its
// own session, with its output in the state directory, so that it neither
// receives the plugin's signals nor ends with it. It is meant for running
// without a cluster, and for tests; in a cluster, a restart of the plugin's
// container would take the daemons with it (use Pod).
type Process struct {
	// Binary is the burstcache executable to run.
	Binary string
}

var _ Mounter = (*Process)(nil)

// pollInterval is how often Process and Pod look for a change they wait for.
const pollInterval = 50 * time.Millisecond

// Start runs the daemon and waits until its mount serves.
func (p *Process) Start(ctx context.Context, s Spec) error {
	if err := prepare(s.Dir); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(p.Binary, s.Args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the mount daemon: %w", err)
	}
	exited := make(chan struct{})
	// Reaping the child here keeps it from lingering as a zombie while this
	// process lives; once this process is gone, init reaps it.
	go func() { _ = cmd.Wait(); close(exited) }()
	return p.waitReady(ctx, s, cmd, exited)
}

// waitReady waits until the daemon serves. A daemon that does not in time
// is killed: it never served, so it holds nothing to publish.
func (p *Process) waitReady(ctx context.Context, s Spec, cmd *exec.Cmd, exited <-chan struct{}) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for !ready(s) {
		select {
		case <-exited:
			return fmt.Errorf("%w: it exited: %s", ErrNotReady, tail(filepath.Join(s.Dir, logFile)))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("%w: %w: %s", ErrNotReady, ctx.Err(), tail(filepath.Join(s.Dir, logFile)))
		case <-t.C:
		}
	}
	return nil
}

// Running reports whether the process the daemon's ready file names still
// runs the mount of s.
func (p *Process) Running(_ context.Context, s Spec) (bool, error) {
	return daemonAlive(s), nil
}

// Stop sends SIGTERM to the daemon and waits until it has ended.
func (p *Process) Stop(ctx context.Context, s Spec) error {
	if pid := daemonPID(s); pid > 0 && daemonAlive(s) {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return fmt.Errorf("signalling mount daemon %d: %w", pid, err)
		}
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for daemonAlive(s) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrStopTimeout, ctx.Err())
		case <-t.C:
		}
	}
	return ExitStatus(s.Dir)
}

// daemonPID returns the process ID in the daemon's ready file, or 0.
func daemonPID(s Spec) int {
	b, err := os.ReadFile(filepath.Join(s.Dir, readyFile))
	if err != nil {
		return 0
	}
	var info struct {
		PID int `json:"pid"`
	}
	if json.Unmarshal(b, &info) != nil {
		return 0
	}
	return info.PID
}

// daemonAlive reports whether the daemon's process runs, and is the mount
// of s rather than a process that took over a recycled pid. It matches the
// mount point in the command line, not the binary, so that a daemon started
// by an older plugin is found after an upgrade.
func daemonAlive(s Spec) bool {
	pid := daemonPID(s)
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	return len(args) > 1 && args[1] == "mount" && args[len(args)-1] == s.Target
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, "\n")
}
