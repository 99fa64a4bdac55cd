package engine

import (
	"errors"
	"strings"
	"testing"
)

// TestConfigRefusalsStateTheRange: a server that will not start must say
// what it would start with, since its operator sets the sizes in a
// CachePool far from the log that shows the error.
func TestConfigRefusalsStateTheRange(t *testing.T) {
	for name, tc := range map[string]struct {
		extentSize, capacity int64
		wantSays             string
	}{
		"extent below 4 KiB":      {extentSize: 1 << 10, capacity: 1 << 20, wantSays: "outside 4096 (4 KiB) to 1073741824 (1 GiB) bytes"},
		"extent above 1 GiB":      {extentSize: 2 << 30, capacity: 8 << 30, wantSays: "outside 4096 (4 KiB) to 1073741824 (1 GiB) bytes"},
		"capacity of 1 extent":    {extentSize: 1 << 20, capacity: 1 << 20, wantSays: "at least 2097152 bytes"},
		"capacity below 1 extent": {extentSize: 1 << 20, capacity: 4096, wantSays: "at least 2097152 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Dir: t.TempDir(), Backing: newForgetful(t.TempDir()), ExtentSize: tc.extentSize, Capacity: tc.capacity}
			_, err := cfg.withDefaults()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("withDefaults() = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.wantSays) {
				t.Errorf("withDefaults() = %q, which does not say %q", err, tc.wantSays)
			}
		})
	}
}
