package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writeTree writes files of assorted sizes through the mount and returns
// what each path should hold.
func writeTree(t *testing.T, mount string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"empty":             {},
		"small":             []byte("hello, burst buffer\n"),
		"one-extent":        randomBytes(1<<20, 1),
		"d/e/striped":       randomBytes(5<<20+12345, 2),
		"d/sparse-tail.bin": nil,
	}
	for p, data := range files {
		full := filepath.Join(mount, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if data == nil {
			continue
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sparse := filepath.Join(mount, "d/sparse-tail.bin")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 3<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	files["d/sparse-tail.bin"] = append(make([]byte, 3<<20), "end"...)
	return files
}

func TestFilesReachTheBackingDirectoryAfterDown(t *testing.T) {
	requireFUSE(t)
	for name, servers := range map[string]int{"one server": 1, "three servers": 3} {
		t.Run(name, func(t *testing.T) {
			in := dirs(t)
			up(t, in, servers)
			files := writeTree(t, in.mount)
			for p, want := range files {
				sameFile(t, filepath.Join(in.mount, p), want)
			}
			out := must(t, "local", "status", "--mount", in.mount)
			if !strings.Contains(out, "total") || strings.Count(out, " up ") != servers {
				t.Errorf("status does not show %d servers up:\n%s", servers, out)
			}
			must(t, "local", "down", "--mount", in.mount)
			if isMounted(t, in.mount) {
				t.Errorf("still mounted after down")
			}
			for p, want := range files {
				sameFile(t, filepath.Join(in.backing, p), want)
			}
		})
	}
}

// TestDownWithABinaryElsewhere brings an instance down with a copy of the
// binary at another path, as after an upgrade that installed it elsewhere:
// the processes the first one started must be told from processes that
// reused their pids all the same, and stopped after publishing.
func TestDownWithABinaryElsewhere(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2, "--client-cache")
	st := readState(t, in.cacheDir)
	data := []byte("written before the upgrade\n")
	if err := os.WriteFile(filepath.Join(in.mount, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "burstcache")
	if err := os.WriteFile(other, b, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(other, "local", "down", "--mount", in.mount).CombinedOutput()
	if err != nil {
		t.Fatalf("down with %s: %v\n%s", other, err, out)
	}
	pids := []int{st.MountPID}
	for _, s := range st.Servers {
		pids = append(pids, s.PID)
	}
	for _, pid := range pids {
		// Gone, or a zombie its new parent has yet to reap.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if _, rest, _ := strings.Cut(string(stat), ") "); err == nil && !strings.HasPrefix(rest, "Z") {
			t.Errorf("pid %d, started by up, still runs after down", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	sameFile(t, filepath.Join(in.backing, "f"), data)
}

// mountAgain mounts the instance's servers a second time, as another node
// would, and returns the mount point.
func mountAgain(t *testing.T, in instance) string {
	t.Helper()
	st := readState(t, in.cacheDir)
	var addrs []string
	for _, s := range st.Servers {
		addrs = append(addrs, s.Data)
	}
	mp := filepath.Join(filepath.Dir(in.mount), "mnt2")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	return mountByHand(t, mp, "--servers", strings.Join(addrs, ","), "--secret-file", filepath.Join(in.cacheDir, "secret"))
}

// mountByHand runs burstcache mount with flags on the directory mp until
// the test ends, and returns mp once it serves.
func mountByHand(t *testing.T, mp string, flags ...string) string {
	t.Helper()
	ready, logName := mp+".ready", mp+".log"
	cmd := exec.Command(bin, append(append([]string{"mount"}, flags...), "--ready-file", ready, mp)...)
	log, _ := os.Create(logName)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logName)
			t.Logf("log of the mount on %s:\n%s", mp, b)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
		forceUnmount(mp)
	})
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return mp
		}
	}
	b, _ := os.ReadFile(logName)
	t.Fatalf("the mount on %s did not come up:\n%s", mp, b)
	return ""
}

// TestThreeServersTwoMounts has two mounts of one instance see each
// other's files after close, and several processes on both write disjoint
// ranges of one shared file.
func TestThreeServersTwoMounts(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 3)
	other := mountAgain(t, in)

	a := randomBytes(3<<20+17, 3)
	if err := os.WriteFile(filepath.Join(in.mount, "from-a"), a, 0o644); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(other, "from-a"), a)
	b := randomBytes(2<<20+5, 4)
	if err := os.WriteFile(filepath.Join(other, "from-b"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(in.mount, "from-b"), b)

	want := writeShared(t, []string{in.mount, other}, "shared", 6, 1<<20+4096)
	sameFile(t, filepath.Join(in.mount, "shared"), want)
	sameFile(t, filepath.Join(other, "shared"), want)

	must(t, "local", "down", "--mount", in.mount)
	for name, data := range map[string][]byte{"from-a": a, "from-b": b, "shared": want} {
		sameFile(t, filepath.Join(in.backing, name), data)
	}
}

// writeShared has writers processes (dd), alternating between the mounts,
// each write its own block of one file, as an N-to-1 checkpoint does, and
// returns what the file should hold.
func writeShared(t *testing.T, mounts []string, name string, writers, block int) []byte {
	t.Helper()
	src := filepath.Join(t.TempDir(), "blocks")
	var want []byte
	for w := range writers {
		want = append(want, randomBytes(block, byte(10+w))...)
	}
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Create(filepath.Join(mounts[0], name)); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			dst := filepath.Join(mounts[w%len(mounts)], name)
			out, err := exec.Command("dd", "if="+src, "of="+dst, fmt.Sprintf("bs=%d", block),
				fmt.Sprintf("skip=%d", w), fmt.Sprintf("seek=%d", w), "count=1", "conv=notrunc", "status=none").CombinedOutput()
			if err != nil {
				err = fmt.Errorf("dd of block %d: %w: %s", w, err, out)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// TestClientCacheWritesReachTheBackingDirectory starts the mount with the
// kernel's page cache and write-back cache, which gathers small writes on
// the node before they reach the servers, and checks that every byte
// written reaches the backing directory after down.
func TestClientCacheWritesReachTheBackingDirectory(t *testing.T) {
	requireFUSE(t)
	in := dirs(t)
	up(t, in, 2, "--client-cache")
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", readState(t, in.cacheDir).MountPID))
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Split(string(cmdline), "\x00"); !slices.Contains(args, "--client-cache") {
		t.Fatalf("the mount runs without the client cache: %q", args)
	}
	files := writeTree(t, in.mount)
	// 4 KiB writes in random order, as a small-block workload makes them.
	want := randomBytes(3<<20, 3)
	f, err := os.Create(filepath.Join(in.mount, "small-writes"))
	if err != nil {
		t.Fatal(err)
	}
	const block = 4096
	for _, i := range rand.New(rand.NewPCG(3, 3)).Perm(len(want) / block) {
		if _, err := f.WriteAt(want[i*block:(i+1)*block], int64(i*block)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	files["small-writes"] = want
	for p, want := range files {
		sameFile(t, filepath.Join(in.mount, p), want)
	}
	must(t, "local", "down", "--mount", in.mount)
	for p, want := range files {
		sameFile(t, filepath.Join(in.backing, p), want)
	}
}

// TestPreloadPassesOverWhatItCannotRead preloads a tree with a directory
// the instance's identity may not list: as cp -r does, the preload copies
// up every file it can read, then fails naming the directory, byte for
// byte even when its name is not UTF-8. A file preloaded is served from
// the cache, without a copy-up.
func TestPreloadPassesOverWhatItCannotRead(t *testing.T) {
	requireFUSE(t)
	for name, root := range map[string]string{"UTF-8": "t", "Latin-1": "t\xe9"} {
		t.Run(name, func(t *testing.T) { preloadPassesOverWhatItCannotRead(t, root) })
	}
}

func preloadPassesOverWhatItCannotRead(t *testing.T, root string) {
	in := dirs(t)
	before := map[string][]byte{root + "/a/f": randomBytes(3<<20, 1), root + "/z/f": randomBytes(3<<20, 2), root + "/m/f": randomBytes(10, 3)}
	for n, data := range before {
		p := filepath.Join(in.backing, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeWhole(t, p, data)
	}
	for _, p := range []string{"", "/a", "/a/f", "/m", "/m/f", "/z", "/z/f"} {
		if err := os.Chown(filepath.Join(in.backing, root+p), 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(in.backing, root+"/m"), 0); err != nil {
		t.Fatal(err)
	}
	// The servers act as uid 1000: let it reach the backing directory.
	os.Chmod(filepath.Dir(in.backing), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(in.backing)), 0o755)
	up(t, in, 2, "--uid", "1000", "--gid", "1000")
	r := burstcache(t, "local", "preload", "--mount", in.mount, filepath.Join(in.mount, root))
	if r.code == 0 || !strings.Contains(r.out, fmt.Sprintf("%q", root+"/m")) {
		t.Errorf("preload of a tree with an unreadable directory: exit %d, %q; want a failure naming %q", r.code, r.out, root+"/m")
	}
	// Preloaded, the files are read without a copy-up.
	st := readState(t, in.cacheDir)
	copied := serversMetric(t, in, st, "burstcache_copy_up_bytes_total")
	for _, n := range []string{root + "/a/f", root + "/z/f"} {
		sameFile(t, filepath.Join(in.mount, n), before[n])
	}
	if n := serversMetric(t, in, st, "burstcache_copy_up_bytes_total") - copied; n != 0 {
		t.Errorf("reading the preloaded files copied %g bytes up", n)
	}
}
