package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// writerEnv makes the test binary a writer process (writerMain) instead
// of running the tests.
const writerEnv = "BURSTCACHE_INTEGRATION_WRITER"

// writerMain creates file args[0] and says "opened"; on a line of its
// standard input it writes the bytes of file args[1] to it and says
// "written"; on the next line it fsyncs and closes the file, and says
// "synced". It says what failed instead, and stops. With args[2] "mapped"
// it writes through a shared mapping of the file, which it closes before
// it writes, and unmaps it instead of the fsync.
func writerMain(args []string) int {
	data, err := os.ReadFile(args[1])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	f, err := os.Create(args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	write := func() error { _, err := f.Write(data); return err }
	sync := func() error { return errors.Join(f.Sync(), f.Close()) }
	if len(args) > 2 && args[2] == "mapped" {
		var m []byte
		write = func() (err error) {
			if err := f.Truncate(int64(len(data))); err != nil {
				return err
			}
			if m, err = unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
				return err
			}
			// Closed first: a close writes back the dirty pages.
			if err := f.Close(); err != nil {
				return err
			}
			copy(m, data)
			return nil
		}
		sync = func() error { return unix.Munmap(m) }
	}
	in := bufio.NewReader(os.Stdin)
	for _, step := range []struct {
		said string
		do   func() error
	}{{"opened", nil}, {"written", write}, {"synced", sync}} {
		if step.do != nil {
			if _, err := in.ReadString('\n'); err != nil {
				fmt.Println(err)
				return 1
			}
			if err := step.do(); err != nil {
				fmt.Println(err)
				return 1
			}
		}
		fmt.Println(step.said)
	}
	return 0
}

// writer is a writer process that has written its file and holds it open.
type writer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startWriter starts a writer process that creates path, to write data to
// it (through a shared mapping with mode "mapped"), and waits until it has
// created it.
func startWriter(t *testing.T, path string, data []byte, mode string) *writer {
	t.Helper()
	src := t.TempDir() + "/data"
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], path, src, mode)
	cmd.Env = append(os.Environ(), writerEnv+"=1")
	stdin, out := startPiped(t, cmd)
	w := &writer{cmd: cmd, stdin: stdin, out: out}
	if err := <-w.step("opened"); err != nil {
		t.Fatalf("writer: %v", err)
	}
	return w
}

// write asks the writer to write its data, and returns where the outcome
// will come.
func (w *writer) write() <-chan error { return w.next("written") }

// sync asks the writer to fsync and close its file, and returns where the
// outcome will come.
func (w *writer) sync() <-chan error { return w.next("synced") }

// next asks the writer for its next step, which says want when it is done.
func (w *writer) next(want string) <-chan error {
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		done := make(chan error, 1)
		done <- err
		return done
	}
	return w.step(want)
}

// step returns where the outcome of the writer's step under way will come:
// nil if it says want.
func (w *writer) step(want string) <-chan error {
	done := make(chan error, 1)
	go func() {
		line, err := w.out.ReadString('\n')
		switch {
		case err != nil:
			done <- err
		case line != want+"\n":
			done <- errors.New(strings.TrimSpace(line))
		default:
			done <- nil
		}
	}()
	return done
}

// startPiped starts cmd with pipes to its standard input and from its
// standard output, and kills it when the test ends.
func startPiped(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return stdin, bufio.NewReader(stdout)
}
