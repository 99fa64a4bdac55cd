package driver

import (
	"errors"
	"testing"
)

func TestCleanSubPath(t *testing.T) {
	tests := map[string]struct {
		sub     string
		want    string
		wantErr bool
	}{
		"root":              {sub: "", want: ""},
		"dot":               {sub: ".", want: ""},
		"directory":         {sub: "a/b", want: "a/b"},
		"trailing slash":    {sub: "a/b/", want: "a/b"},
		"doubled slashes":   {sub: "a//b/./c", want: "a/b/c"},
		"parent":            {sub: "..", wantErr: true},
		"parent inside":     {sub: "a/../../b", wantErr: true},
		"parent that stays": {sub: "a/../b", wantErr: true},
		"absolute":          {sub: "/etc", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := cleanSubPath(tc.sub)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("cleanSubPath(%q) = %q, %v; want ErrInvalid", tc.sub, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("cleanSubPath(%q) = %q, %v; want %q", tc.sub, got, err, tc.want)
			}
		})
	}
}
