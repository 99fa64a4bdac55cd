package fusefs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A test must not map a file of a mount that its own process serves: a
// fault on the mapping holds the process's address space while it waits
// for the mount, and the goroutines that would answer it may need that
// address space first (the runtime maps memory as the heap grows, and
// always under the race detector). The process then waits for itself. So
// such a mapping lives in a child, the test binary run again with
// mapperEnv set, which the test drives one step at a time.

// mapperEnv marks a re-executed test binary that holds a mapping for its
// parent (see mapperMain).
const mapperEnv = "BURSTCACHE_FUSEFS_MAPPER"

// mapping is a shared, writable mapping of a file held by a child process.
// Its methods end the test on any failure of the child.
type mapping struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr strings.Builder
}

// mapShared starts a child that opens path read-write and maps its first n
// bytes shared, and returns once the mapping exists. The child keeps its
// descriptor until closeFile or unmap; the mapping goes at the end of the
// test if unmap did not end it before.
func mapShared(t *testing.T, path string, n int) *mapping {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := &mapping{t: t, cmd: exec.Command(self, path, strconv.Itoa(n))}
	// A child built with the race detector would otherwise sleep a second
	// as it exits, for reports of goroutines that it does not have.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	m.cmd.Env = append(os.Environ(), mapperEnv+"=1", "GORACE="+gorace)
	m.cmd.Stderr = &m.stderr
	if m.in, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.out = bufio.NewReader(stdout)
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Closing the child's input unmaps and ends it. The mount's
		// own clean-up, registered earlier, runs after this one.
		if m.cmd.ProcessState == nil {
			m.in.Close()
			m.cmd.Wait()
		}
	})
	m.reply("mapping " + path)
	return m
}

// write copies s into the mapping at off.
func (m *mapping) write(off int, s string) {
	m.t.Helper()
	m.do(fmt.Sprintf("write %d %q", off, s))
}

// read returns n bytes of the mapping from off.
func (m *mapping) read(off, n int) string {
	m.t.Helper()
	q := m.do(fmt.Sprintf("read %d %d", off, n))
	s, err := strconv.Unquote(q)
	if err != nil {
		m.t.Fatalf("mapping child answered %q to a read: %v", q, err)
	}
	return s
}

// sync writes the mapping's dirty pages back with msync(MS_SYNC).
func (m *mapping) sync() {
	m.t.Helper()
	m.do("sync")
}

// closeFile closes the child's descriptor; the mapping stays.
func (m *mapping) closeFile() {
	m.t.Helper()
	m.do("close")
}

// unmap removes the mapping, which writes back what a file without a
// descriptor still holds dirty, and waits for the child to end.
func (m *mapping) unmap() {
	m.t.Helper()
	m.do("unmap")
	m.in.Close()
	if err := m.cmd.Wait(); err != nil {
		m.t.Fatalf("mapping child: %v\n%s", err, m.stderr.String())
	}
}

// do sends one command to the child and returns what it answered.
func (m *mapping) do(cmd string) string {
	m.t.Helper()
	if _, err := fmt.Fprintln(m.in, cmd); err != nil {
		m.t.Fatalf("sending %q to the mapping child: %v", cmd, err)
	}
	return m.reply(cmd)
}

// reply reads the child's answer to cmd: "ok", then a value if any.
func (m *mapping) reply(cmd string) string {
	m.t.Helper()
	line, err := m.out.ReadString('\n')
	if err != nil {
		m.in.Close()
		werr := m.cmd.Wait()
		m.t.Fatalf("%s: mapping child ended (%v)\n%s", cmd, werr, m.stderr.String())
	}
	value, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ok")
	if !ok {
		m.t.Fatalf("%s: mapping child answered %q", cmd, line)
	}
	return strings.TrimPrefix(value, " ")
}

// mapperMain is the child's side of mapping: args are the path and the
// length to map. It answers each command on its input with a line that
// starts with "ok", and ends at the first failure, which it writes to its
// standard error, or when its input ends.
func mapperMain(args []string) int {
	if err := serveMapping(args, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func serveMapping(args []string, in io.Reader, out io.Writer) error {
	if len(args) != 2 {
		return fmt.Errorf("want a path and a length, got %q", args)
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		return err
	}
	f, err := os.OpenFile(args[0], os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap: %w", err)
	}
	fmt.Fprintln(out, "ok")
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		value, err := mappingStep(m, f, lines.Text())
		if errors.Is(err, errUnmapped) {
			fmt.Fprintln(out, "ok")
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", lines.Text(), err)
		}
		fmt.Fprintln(out, strings.TrimSuffix("ok "+value, " "))
	}
	return errors.Join(lines.Err(), unix.Munmap(m))
}

// errUnmapped is how mappingStep says that the mapping is gone.
var errUnmapped = errors.New("unmapped")

// mappingStep runs one command of the parent on m, mapped from f.
func mappingStep(m []byte, f *os.File, cmd string) (string, error) {
	op, rest, _ := strings.Cut(cmd, " ")
	switch op {
	case "write":
		var off int
		var s string
		if _, err := fmt.Sscanf(rest, "%d %q", &off, &s); err != nil {
			return "", err
		}
		copy(m[off:], s)
		return "", nil
	case "read":
		var off, n int
		if _, err := fmt.Sscanf(rest, "%d %d", &off, &n); err != nil {
			return "", err
		}
		return strconv.Quote(string(m[off : off+n])), nil
	case "sync":
		return "", unix.Msync(m, unix.MS_SYNC)
	case "close":
		return "", f.Close()
	case "unmap":
		if err := unix.Munmap(m); err != nil {
			return "", err
		}
		return "", errUnmapped
	}
	return "", fmt.Errorf("unknown command %q", op)
}
