package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHashIsFNV1a64(t *testing.T) {
	// Reference values of FNV-1a 64: the offset basis for the empty string,
	// and the published test vector for "a".
	tests := map[string]struct {
		path string
		want uint64
	}{
		"empty":  {"", 0xcbf29ce484222325},
		"a":      {"a", 0xaf63dc4c8601ec8c},
		"foobar": {"foobar", 0x85944171f73967e8},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Hash(tc.path); got != tc.want {
				t.Errorf("Hash(%q) = %#x, want %#x", tc.path, got, tc.want)
			}
		})
	}
}

func TestExtentsGoRoundTheServers(t *testing.T) {
	l := Layout{Servers: 3, ExtentSize: 1 << 20}
	base := int(Hash("a") % 3)
	tests := map[string]struct {
		extent int64
		want   int
	}{
		"first extent on the hashed server": {0, base},
		"second on the next":                {1, (base + 1) % 3},
		"wraps after N":                     {3, base},
		"far extent":                        {1<<40 + 2, int((uint64(base) + (1<<40+2)%3) % 3)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := l.ExtentServer("a", tc.extent); got != tc.want {
				t.Errorf("ExtentServer(a, %d) = %d, want %d", tc.extent, got, tc.want)
			}
		})
	}
	if got, want := l.MetaServer("a"), base; got != want {
		t.Errorf("MetaServer(a) = %d, want %d", got, want)
	}
}

func TestSplitCutsAtExtentBoundaries(t *testing.T) {
	l := Layout{Servers: 2, ExtentSize: 100}
	s0 := l.ExtentServer("f", 0)
	s1 := 1 - s0
	tests := map[string]struct {
		off  int64
		n    int
		want []Piece
	}{
		"inside one extent": {10, 50, []Piece{{s0, 10, 0, 50}}},
		"whole extent":      {100, 100, []Piece{{s1, 100, 0, 100}}},
		"across two":        {90, 20, []Piece{{s0, 90, 0, 10}, {s1, 100, 10, 20}}},
		"across three":      {50, 200, []Piece{{s0, 50, 0, 50}, {s1, 100, 50, 150}, {s0, 200, 150, 200}}},
		"empty":             {0, 0, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, l.Split("f", tc.off, tc.n)); diff != "" {
				t.Errorf("Split(f, %d, %d) (-want +got):\n%s", tc.off, tc.n, diff)
			}
		})
	}
}

// TestFilesSpreadEvenly checks that the first extents of many files land on
// every server about equally, so small-file workloads use them all.
func TestFilesSpreadEvenly(t *testing.T) {
	l := Layout{Servers: 4, ExtentSize: 1 << 20}
	counts := make([]int, 4)
	for i := range 4000 {
		counts[l.ExtentServer(fmt.Sprintf("dir/file.%d", i), 0)]++
	}
	for s, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("server %d holds %d of 4000 first extents: %v", s, n, counts)
		}
	}
}
