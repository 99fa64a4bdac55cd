package fusefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/burstcache/burstcache/cacheserver/posixns"
)

// releases is a namespace that records the paths the mount released its
// last descriptor of.
type releases struct {
	*posixns.FS
	released chan string
}

func (r *releases) Released(path string) { r.released <- path }

// TestLastReleaseTellsTheNamespace opens a file twice and closes both
// descriptors: the namespace hears of the release of the last one only.
func TestLastReleaseTellsTheNamespace(t *testing.T) {
	mnt, _, fsys, _ := mountOver(t, Options{}, func(p *posixns.FS) *releases {
		return &releases{FS: p, released: make(chan string, 16)}
	})
	name := filepath.Join(mnt, "f")
	if err := os.WriteFile(name, []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitReleased := func(within time.Duration) (string, bool) {
		select {
		case p := <-fsys.released:
			return p, true
		case <-time.After(within):
			return "", false
		}
	}
	if p, ok := waitReleased(10 * time.Second); !ok || p != "f" {
		t.Fatalf("after writing f: released %q (%v), want f", p, ok)
	}
	a, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if p, ok := waitReleased(500 * time.Millisecond); ok {
		t.Fatalf("released %q with a descriptor of it still open", p)
	}
	b.Close()
	if p, ok := waitReleased(10 * time.Second); !ok || p != "f" {
		t.Fatalf("after the last close: released %q (%v), want f", p, ok)
	}
}
