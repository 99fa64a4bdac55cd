package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRaisePipeLimit(t *testing.T) {
	for name, tc := range map[string]struct {
		old        string
		wantRaised bool
		want       string
	}{
		"the kernel default": {old: "1048576\n", wantRaised: true, want: "4194304"},
		"already enough":     {old: "4194304\n", want: "4194304\n"},
		"more than enough":   {old: "8388608\n", want: "8388608\n"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pipe-max-size")
			if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
				t.Fatal(err)
			}
			raised, err := raisePipeLimit(path, 4<<20)
			if err != nil || raised != tc.wantRaised {
				t.Fatalf("raisePipeLimit = %v, %v; want %v", raised, err, tc.wantRaised)
			}
			if got, _ := os.ReadFile(path); string(got) != tc.want {
				t.Fatalf("limit is %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := raisePipeLimit(filepath.Join(t.TempDir(), "missing"), 4<<20); err == nil {
		t.Fatal("no error for a missing file")
	}
}
