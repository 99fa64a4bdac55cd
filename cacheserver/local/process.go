package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ExitError is returned when a child process ended before it was ready; the
// caller may reuse its exit code.
type ExitError struct {
	What string
	Code int
	// Log is the end of the child's log.
	Log string
}

// Error says which child exited, how, and what it logged last.
func (e *ExitError) Error() string {
	return fmt.Sprintf("%s exited with status %d: %s", e.What, e.Code, e.Log)
}

// ExitCode returns the exit code of the child.
func (e *ExitError) ExitCode() int { return e.Code }

// child is a process started detached from the caller.
type child struct {
	what    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

// start runs bin with args in its own session, with output to logPath.
func start(what, bin string, args []string, logPath string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", what, err)
	}
	c := &child{what: what, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// waitReady waits until ready returns true, the child exits, or ctx ends.
func (c *child) waitReady(ctx context.Context, ready func() bool) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-c.exited:
			return &ExitError{What: c.what, Code: c.cmd.ProcessState.ExitCode(), Log: tail(c.logPath)}
		case <-ctx.Done():
			_ = c.cmd.Process.Kill()
			return fmt.Errorf("waiting for %s: %w (log: %s)", c.what, ctx.Err(), tail(c.logPath))
		case <-t.C:
		}
	}
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

// alive reports whether pid runs the process started at start (in clock
// ticks since boot, as /proc/PID/stat gives it), not one that took over a
// recycled pid. A state written before start times were recorded gives
// 0, and then the process must run the program bin, which misses
// processes a binary at another path started.
func alive(pid int, start uint64, bin string) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	state, started, ok := parseStat(stat)
	if !ok || state == "Z" {
		return false
	}
	if start != 0 {
		return started == start
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == bin
}

// startTime returns when pid started, in clock ticks since boot, or 0.
func startTime(pid int) uint64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, started, _ := parseStat(stat)
	return started
}

// parseStat returns the state and start time of a /proc/PID/stat line. The
// command name, in parentheses, may hold spaces and parentheses itself, so
// the fields are counted from its last closing parenthesis.
func parseStat(stat []byte) (state string, start uint64, ok bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	// Fields from the third on: state is the third, starttime the 22nd.
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return "", 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return fields[0], start, err == nil
}

// ErrStopTimeout is returned when a process did not exit in time after
// SIGTERM; it was then killed.
var ErrStopTimeout = errors.New("process did not stop in time")

// stop sends SIGTERM to pid, if it still runs the process alive
// recognises, and waits for it to exit, killing it after timeout.
func stop(pid int, start uint64, bin string, timeout time.Duration) error {
	if !alive(pid, start, bin) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !alive(pid, start, bin) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return fmt.Errorf("pid %d: %w", pid, ErrStopTimeout)
}
