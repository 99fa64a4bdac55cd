package control

import "testing"

func TestFormatBytes(t *testing.T) {
	tests := map[string]struct {
		n    int64
		want string
	}{
		"bytes":     {512, "512 B"},
		"kibibytes": {1536, "1.5 KiB"},
		"mebibytes": {64 << 20, "64 MiB"},
		"tebibytes": {3 << 40, "3 TiB"},
		"pebibytes": {5 << 50, "5 PiB"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FormatBytes(tc.n); got != tc.want {
				t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}
