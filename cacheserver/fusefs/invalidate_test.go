package fusefs

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestInvalidateDropsTheClientCache changes files behind a mount with the
// client cache, whose kernel keeps their pages and sizes, and checks that
// Invalidate of their directory makes the mount show the changes, appends
// land at the new end, and a file open with dirty pages keeps them.
func TestInvalidateDropsTheClientCache(t *testing.T) {
	mnt, backing, s := mount(t, Options{ClientCache: true})
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]struct{ before, after []byte }{
		"d/shrunk": {bytes.Repeat([]byte("a"), 20000), []byte("short")},
		"d/grown":  {bytes.Repeat([]byte("b"), 3000), bytes.Repeat([]byte("c"), 9000)},
	}
	for p, f := range files {
		if err := os.WriteFile(filepath.Join(mnt, p), f.before, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || !bytes.Equal(got, f.before) {
			t.Fatalf("reading %s: %d bytes, %v", p, len(got), err)
		}
	}
	dirty, err := os.OpenFile(filepath.Join(mnt, "d/dirty"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer dirty.Close()
	written := bytes.Repeat([]byte("w"), 5000)
	if _, err := dirty.Write(written); err != nil {
		t.Fatal(err)
	}
	for p, f := range files {
		if err := os.WriteFile(filepath.Join(backing, p), f.after, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	waitReleased(t, s, "d/shrunk", "d/grown")
	s.Invalidate([]string{"d"})
	if got, err := os.ReadFile(filepath.Join(backing, "d/dirty")); err != nil || !bytes.Equal(got, written) {
		t.Errorf("the backing file of a file open with dirty pages has %d bytes (%v), want the %d written", len(got), err, len(written))
	}
	for p, f := range files {
		if got, err := os.ReadFile(filepath.Join(mnt, p)); err != nil || !bytes.Equal(got, f.after) {
			t.Errorf("reading %s after Invalidate: %d bytes, %v; want the %d of the backing file", p, len(got), err, len(f.after))
		}
	}
	a, err := os.OpenFile(filepath.Join(mnt, "d/grown"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("end")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Repeat([]byte("c"), 9000), "end"...)
	if got, err := os.ReadFile(filepath.Join(backing, "d/grown")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("after an append the backing file has %d bytes (%v), want %d ending in the append", len(got), err, len(want))
	}
}

// TestInvalidateWarnsOfOpenFiles checks that Invalidate names the files
// open through a mount with the client cache, whose size the kernel keeps,
// and only those.
func TestInvalidateWarnsOfOpenFiles(t *testing.T) {
	var logs syncBuffer
	mnt, _, s := mount(t, Options{ClientCache: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, name := range []string{"open", "closed"} {
		if err := os.WriteFile(filepath.Join(mnt, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(mnt, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waitReleased(t, s, "closed")
	s.Invalidate([]string{""})
	out := logs.String()
	if !strings.Contains(out, "keep the size") || !strings.Contains(out, "files=1 paths=[open]") {
		t.Errorf("logs name the open file only, want:\n%s", out)
	}
}

// TestInvalidateWarnsOnceOfManyOpenFiles holds more files open than a
// warning names: an invalidation of their directory logs one line that
// counts them all.
func TestInvalidateWarnsOnceOfManyOpenFiles(t *testing.T) {
	var logs syncBuffer
	mnt, _, s := mount(t, Options{ClientCache: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const files = 3 * maxNamedOpen
	for i := range files {
		f, err := os.Create(filepath.Join(mnt, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	s.Invalidate([]string{""})
	lines := strings.Count(logs.String(), "open through the mount")
	if lines != 1 || !strings.Contains(logs.String(), fmt.Sprintf("files=%d ", files)) {
		t.Errorf("%d open files gave %d warnings, want one that counts them:\n%s", files, lines, logs.String())
	}
}

// waitReleased waits until the mount has released every handle of the
// files at paths. close(2) returns before the kernel tells the mount of the
// release, and a file that Invalidate finds open keeps its size in the
// kernel, as it must.
func waitReleased(t *testing.T, s *Server, paths ...string) {
	t.Helper()
	for _, p := range paths {
		in := &s.root.Inode
		for name := range strings.SplitSeq(p, "/") {
			if in = in.GetChild(name); in == nil {
				t.Fatalf("the mount does not know %s", p)
			}
		}
		n := in.Operations().(*node)
		for deadline := time.Now().Add(10 * time.Second); n.isOpen(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still open in the mount 10 s after its last close", p)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer that the mount's goroutines may log to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
