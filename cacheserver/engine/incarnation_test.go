package engine

import (
	"testing"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// TestIncarnationOutlivesOnlyCleanStops: a client compares the incarnation
// that took its writes with the one that syncs them, and reports the
// writes lost when they differ. A clean stop committed everything, so the
// number stays; a crash may have lost writes, so it changes.
func TestIncarnationOutlivesOnlyCleanStops(t *testing.T) {
	fsys := vfs.NewCrashable(vfs.OS{}, 5)
	r := newRig(t, modelES, 6, func(c *Config) { crashable(t, c, fsys) })
	first := r.e.Incarnation()
	if first == 0 {
		t.Fatal("Incarnation is zero")
	}
	r.write("f", 0, []byte("acknowledged"))
	r.restart()
	if got := r.e.Incarnation(); got != first {
		t.Fatalf("incarnation after a clean stop: %x, want %x kept", got, first)
	}
	r.write("f", 0, []byte("lost in the crash"))
	r.crash(fsys)
	second := r.e.Incarnation()
	if second == first || second == 0 {
		t.Fatalf("incarnation after a crash: %x, want a new one (was %x)", second, first)
	}
	r.restart()
	if got := r.e.Incarnation(); got != second {
		t.Fatalf("incarnation after a clean stop that followed a crash: %x, want %x kept", got, second)
	}
}
