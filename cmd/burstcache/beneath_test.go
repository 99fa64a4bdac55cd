package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenBeneathRefusesLinksOutOfTheGrantedPrefix builds a granted prefix
// whose user planted links to a sibling project, absolute and relative:
// beneath the prefix they are refused, links that stay inside it are
// followed, and without a prefix the path is opened as written.
func TestOpenBeneathRefusesLinksOutOfTheGrantedPrefix(t *testing.T) {
	base := t.TempDir()
	prefix, other := filepath.Join(base, "climate"), filepath.Join(base, "other")
	for _, d := range []string{filepath.Join(prefix, "run1"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"up": "../other", "abs": other, "in": "run1", "nested": "in"} {
		if err := os.Symlink(target, filepath.Join(prefix, name)); err != nil {
			t.Fatal(err)
		}
	}
	tests := map[string]struct {
		base, dir string
		want      string // the directory opened, "" for a refusal
		wantErr   error
	}{
		"the prefix itself":            {prefix, prefix, prefix, nil},
		"a directory below":            {prefix, prefix + "/run1", prefix + "/run1", nil},
		"links that stay inside":       {prefix, prefix + "/nested", prefix + "/run1", nil},
		"a relative link out":          {prefix, prefix + "/up", "", unix.EXDEV},
		"an absolute link out":         {prefix, prefix + "/abs", "", unix.EXDEV},
		"a sibling with a longer name": {prefix, prefix + "x", "", errNotBeneath},
		"dot-dot in the path":          {prefix, prefix + "/../other", "", errNotBeneath},
		"no prefix: opened as written": {"", prefix + "/up", other, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := openBeneath(tc.base, tc.dir)
			if tc.want == "" {
				if err == nil {
					f.Close()
				}
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("openBeneath(%q, %q): %v, want %v", tc.base, tc.dir, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("openBeneath(%q, %q): %v", tc.base, tc.dir, err)
			}
			defer f.Close()
			var got, want unix.Stat_t
			if err := unix.Fstat(int(f.Fd()), &got); err != nil {
				t.Fatal(err)
			}
			if err := unix.Stat(tc.want, &want); err != nil {
				t.Fatal(err)
			}
			if got.Ino != want.Ino || got.Dev != want.Dev {
				t.Errorf("openBeneath(%q, %q) opened another directory than %s", tc.base, tc.dir, tc.want)
			}
		})
	}
}
