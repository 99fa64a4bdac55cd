package plugin

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestRelativePath(t *testing.T) {
	inst := &cachev1alpha1.CacheInstance{Spec: cachev1alpha1.CacheInstanceSpec{
		Backing: &cachev1alpha1.BackingPath{Path: "/lus/global/projects/climate"},
	}}
	tests := map[string]struct{ in, want string }{
		"relative stays":                {in: "out/run", want: "out/run"},
		"the root":                      {in: "/lus/global/projects/climate/", want: ""},
		"under the root":                {in: "/lus/global/projects/climate/out/../in", want: "in"},
		"a sibling with the same start": {in: "/lus/global/projects/climate2/x", want: "/lus/global/projects/climate2/x"},
		"outside is passed on":          {in: "/etc/passwd", want: "/etc/passwd"},
		"climbing is passed on":         {in: "../other", want: "../other"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := relativePath(inst, tc.in); got != tc.want {
				t.Errorf("relativePath(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestProgressLine(t *testing.T) {
	dirty := resource.MustParse("3Mi")
	usage := &cachev1alpha1.Usage{Dirty: &dirty}
	flush := cachev1alpha1.RequestSpec{ID: "f", Operation: cachev1alpha1.RequestFlush}
	preload := cachev1alpha1.RequestSpec{ID: "p", Operation: cachev1alpha1.RequestPreload, Path: "in"}
	tests := map[string]struct {
		req  cachev1alpha1.RequestSpec
		st   cachev1alpha1.RequestStatus
		want string
	}{
		"not taken yet shows the instance's dirty data": {req: flush, st: cachev1alpha1.RequestStatus{Phase: "Pending", Message: "waiting"}, want: "flush -: Pending, dirty 3Mi: waiting"},
		"running shows what the request has left":       {req: flush, st: cachev1alpha1.RequestStatus{Phase: "Running", BytesRemaining: 1 << 20}, want: "flush -: Running, dirty 1Mi"},
		"done": {req: flush, st: cachev1alpha1.RequestStatus{Phase: "Succeeded"}, want: "flush -: Succeeded, dirty 0"},
		"a path flush shows the instance's dirty data": {req: cachev1alpha1.RequestSpec{Operation: "flush", Path: "out"}, st: cachev1alpha1.RequestStatus{Phase: "Running"}, want: "flush out: Running, dirty 3Mi"},
		"other hints say no dirty data":                {req: cachev1alpha1.RequestSpec{Operation: "evict", Path: "out"}, st: cachev1alpha1.RequestStatus{Phase: "Failed", Message: "no"}, want: "evict out: Failed: no"},
		"a preload before the servers know the total":  {req: preload, st: cachev1alpha1.RequestStatus{Phase: "Running"}, want: "preload in: Running"},
		"a running preload shows how far it got":       {req: preload, st: cachev1alpha1.RequestStatus{Phase: "Running", BytesDone: 3 << 20, BytesTotal: 12 << 20}, want: "preload in: Running, copied up 3Mi of 12Mi (25%)"},
		"a preload that succeeded shows all of it":     {req: preload, st: cachev1alpha1.RequestStatus{Phase: "Succeeded", BytesDone: 12 << 20, BytesTotal: 12 << 20}, want: "preload in: Succeeded, copied up 12Mi of 12Mi (100%)"},
		"a preload that failed says why":               {req: preload, st: cachev1alpha1.RequestStatus{Phase: "Failed", Message: "no such file"}, want: "preload in: Failed: no such file"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := progressLine(tc.req, &tc.st, usage); got != tc.want {
				t.Errorf("progressLine = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequestPathsThatTheAPICannotCarryAreRefused(t *testing.T) {
	tests := map[string]struct {
		in      string
		wantErr bool
	}{
		"plain":                     {in: "out/run"},
		"UTF-8 with odd characters": {in: "caf\u00e9/new\nline/\"-rf\"/ /..."},
		"a replacement character":   {in: "caf\uFFFD"},
		"Latin-1":                   {in: "caf\xe9", wantErr: true},
		"arbitrary bytes":           {in: "/lus/global/\xff\xfe", wantErr: true},
		"a NUL byte":                {in: "a\x00b", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := checkRequestPath(tc.in); (err != nil) != tc.wantErr {
				t.Errorf("checkRequestPath(%q) = %v, want an error: %v", tc.in, err, tc.wantErr)
			}
		})
	}
}
