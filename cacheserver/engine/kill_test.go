package engine

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

const (
	killES    = 64 << 10
	killFiles = 4
	killSize  = 3 * killES
	killChild = "ENGINE_KILL_CHILD"
)

func killConfig(dir string) Config {
	return Config{
		Dir: filepath.Join(dir, "cache"), Backing: backing.NewDir(filepath.Join(dir, "backing")),
		ExtentSize: killES, Capacity: 10 * killES, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tunables: Tunables{WriteBackThreads: 2, DirtyHigh: 30, DirtyLow: 10, EvictHigh: 70, EvictLow: 50,
			WriteWindow: WriteWindow{Multiplier: -1}},
	}
}

// killPattern is the content of file i in round r: 8-byte words that say
// which round wrote them and where.
func killPattern(r, i int) []byte {
	b := make([]byte, killSize)
	for w := 0; w < killSize/8; w++ {
		binary.LittleEndian.PutUint64(b[w*8:], uint64(r)<<40|uint64(i)<<32|uint64(w))
	}
	return b
}

// runKillChild rewrites the files round after round, writing each in
// random-sized pieces, and prints "ack file round" after each Sync. It runs
// until killed.
func runKillChild(dir string, start int) {
	e, err := Open(killConfig(dir))
	if err != nil {
		fmt.Println("open error:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(start), 9))
	out := bufio.NewWriter(os.Stdout)
	for r := start; ; r++ {
		i := rng.IntN(killFiles)
		data := killPattern(r, i)
		for off := 0; off < killSize; {
			n := min(8*(1+rng.IntN(killES/4)), killSize-off)
			if _, err := e.WriteAt(ctx, fmt.Sprint(i), data[off:off+n], int64(off)); err != nil {
				fmt.Fprintln(out, "write error:", err)
				out.Flush()
				os.Exit(2)
			}
			off += n
		}
		if rng.IntN(3) == 0 {
			if err := e.Sync(ctx, fmt.Sprint(i)); err != nil {
				fmt.Fprintln(out, "sync error:", err)
				out.Flush()
				os.Exit(2)
			}
			fmt.Fprintf(out, "ack %d %d\n", i, r)
			out.Flush()
		}
	}
}

// TestKill9 runs the engine in a child process that writes and syncs, kills
// it with SIGKILL at random moments, and checks after each kill that every
// synced round of every file is there (or a later one) and that every word
// read is one some round wrote at that place.
func TestKill9(t *testing.T) {
	if d := os.Getenv(killChild); d != "" {
		dir, start, _ := strings.Cut(d, ":")
		n, _ := strconv.Atoi(start)
		runKillChild(dir, n)
		return
	}
	dir := t.TempDir()
	acked := map[int]int{}
	start := 1
	rng := rand.New(rand.NewPCG(1, 2))
	for kill := range 4 {
		last := runAndKill(t, dir, start, time.Duration(100+rng.IntN(400))*time.Millisecond, acked)
		checkKilled(t, dir, acked)
		t.Logf("kill %d: rounds %d..%d, acked %v", kill, start, last, acked)
		start = last + 1
	}
}

// runAndKill starts a child at round start, kills it after d, records its
// acknowledgements and returns the last round it acknowledged.
func runAndKill(t *testing.T, dir string, start int, d time.Duration, acked map[int]int) int {
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", killChild, dir, start))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(d, func() { cmd.Process.Signal(syscall.SIGKILL) })
	last := start
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var i, r int
		if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &i, &r); err != nil {
			t.Fatalf("child: %s", sc.Text())
		}
		acked[i], last = r, r
	}
	cmd.Wait()
	if last == start {
		t.Fatalf("child acknowledged nothing in %v", d)
	}
	return last
}

func checkKilled(t *testing.T, dir string, acked map[int]int) {
	t.Helper()
	e, err := Open(killConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i, r := range acked {
		b := make([]byte, killSize)
		n, err := e.ReadAt(context.Background(), fmt.Sprint(i), b, 0)
		if n != killSize {
			t.Fatalf("file %d: read %d bytes, %v", i, n, err)
		}
		for w := 0; w < killSize/8; w++ {
			v := binary.LittleEndian.Uint64(b[w*8:])
			if int(v>>40) < r || int(v>>32&0xff) != i || int(v&0xffffffff) != w {
				t.Fatalf("file %d word %d = %#x: want round >= %d of file %d, word %d", i, w, v, r, i, w)
			}
		}
	}
}
