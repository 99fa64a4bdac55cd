package hint

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		value   string
		want    cachev1alpha1.RequestSpec
		wantErr bool
	}{
		"flush of a directory":    {value: `{"id":"a","operation":"flush","path":"out/./run/"}`, want: cachev1alpha1.RequestSpec{ID: "a", Operation: "flush", Path: "out/run"}},
		"the root":                {value: `{"id":"a","operation":"evict","path":"."}`, want: cachev1alpha1.RequestSpec{ID: "a", Operation: "evict"}},
		"no path is the root":     {value: `{"id":"a","operation":"preload"}`, want: cachev1alpha1.RequestSpec{ID: "a", Operation: "preload"}},
		"dots that stay inside":   {value: `{"id":"a","operation":"invalidate","path":"a/../b"}`, want: cachev1alpha1.RequestSpec{ID: "a", Operation: "invalidate", Path: "b"}},
		"climbing out":            {value: `{"id":"a","operation":"flush","path":"a/../../x"}`, wantErr: true},
		"parent":                  {value: `{"id":"a","operation":"flush","path":".."}`, wantErr: true},
		"absolute":                {value: `{"id":"a","operation":"flush","path":"/etc"}`, wantErr: true},
		"NUL":                     {value: `{"id":"a","operation":"flush","path":"a\u0000b"}`, wantErr: true},
		"unknown operation":       {value: `{"id":"a","operation":"delete"}`, wantErr: true},
		"the longest path":        {value: `{"id":"a","operation":"flush","path":"` + strings.Repeat("d/", 2047) + `f"}`, want: cachev1alpha1.RequestSpec{ID: "a", Operation: "flush", Path: strings.Repeat("d/", 2047) + "f"}},
		"a path past PATH_MAX":    {value: `{"id":"a","operation":"flush","path":"` + strings.Repeat("d/", 2048) + `f"}`, wantErr: true},
		"odd characters":          {value: `{"id":"a","operation":"flush","path":"caf\u00e9 \"-rf\"\\x/new\nline/\ufffd"}`, want: cachev1alpha1.RequestSpec{ID: "a", Operation: "flush", Path: "caf\u00e9 \"-rf\"\\x/new\nline/\ufffd"}},
		"no id":                   {value: `{"operation":"flush"}`, wantErr: true},
		"unknown field":           {value: `{"id":"a","operation":"flush","runAs":0}`, wantErr: true},
		"not JSON":                {value: `flush /x`, wantErr: true},
		"a name that looks dotty": {value: `{"id":"a","operation":"flush","path":"..hidden"}`, want: cachev1alpha1.RequestSpec{ID: "a", Operation: "flush", Path: "..hidden"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.value)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Parse(%s) = %+v, %v; want ErrInvalid", tc.value, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%s): %v", tc.value, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}
