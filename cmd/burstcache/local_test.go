package main

import "testing"

func TestRelativePath(t *testing.T) {
	tests := map[string]struct {
		p       string
		want    string
		wantErr bool
	}{
		"file under the mount": {p: "/mnt/c/a/b", want: "a/b"},
		"the mount itself":     {p: "/mnt/c", want: ""},
		"outside the mount":    {p: "/mnt/other", wantErr: true},
		"climbing out":         {p: "/mnt/c/../d", wantErr: true},
		"sibling with prefix":  {p: "/mnt/cc/x", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := relativePath("/mnt/c", tc.p)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("relativePath(%q) = %q, %v; want %q, error %v", tc.p, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
