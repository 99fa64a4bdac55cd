package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestAMountStoppedAsSoonAsItServesRecordsItsExit stops mounts with
// SIGTERM the moment their ready file appears, as a CSI node plugin does
// when a volume is unstaged right after it was staged. The mount must
// already take the signal then, unmount and record that it published
// everything: a mount that the signal killed outright records nothing,
// which its supervisor must read as a mount that lost what it held, and
// the volume's mount Lease then stays until an admin steps in.
func TestAMountStoppedAsSoonAsItServesRecordsItsExit(t *testing.T) {
	requireFUSE(t)
	srv := newHandServers(t, [][]string{{}})[0]
	srv.start(t)
	root := filepath.Dir(srv.backing)
	for i := range 10 {
		dir, mp := filepath.Join(root, fmt.Sprintf("state%d", i)), filepath.Join(root, fmt.Sprintf("mnt%d", i))
		for _, d := range []string{dir, mp} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		ready, exit := filepath.Join(dir, "ready.json"), filepath.Join(dir, "exit.json")
		appeared := watchFor(t, dir, "ready.json")
		cmd := exec.Command(bin, "mount", "--servers", srv.data, "--secret-file", filepath.Join(root, "secret"),
			"--ready-file", ready, "--exit-file", exit, mp)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-appeared:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			forceUnmount(mp)
			t.Fatalf("mount %d did not come up:\n%s", i, out.String())
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		forceUnmount(mp)
		b, rerr := os.ReadFile(exit)
		if rerr != nil {
			t.Fatalf("mount %d, stopped as soon as it served (%v), recorded no exit: %v\n%s", i, err, rerr, out.String())
		}
		var info struct{ Code int }
		if err := json.Unmarshal(b, &info); err != nil || info.Code != 0 {
			t.Fatalf("mount %d, stopped as soon as it served, recorded %s (%v)\n%s", i, b, err, out.String())
		}
	}
}

// watchFor returns a channel that is closed once a file named name is
// moved into or written in dir.
func watchFor(t *testing.T, dir, name string) <-chan struct{} {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	seen, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		defer unix.Close(fd)
		buf := make([]byte, 4096)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 100); err != nil && err != unix.EINTR {
				return
			}
			n, err := unix.Read(fd, buf)
			if err != nil {
				continue
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				start := off + unix.SizeofInotifyEvent
				if strings.TrimRight(string(buf[start:start+int(ev.Len)]), "\x00") == name {
					close(seen)
					return
				}
				off = start + int(ev.Len)
			}
		}
	}()
	return seen
}
