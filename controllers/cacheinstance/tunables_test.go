package cacheinstance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestTunableArgs(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	mfs := resource.MustParse("1Gi")
	files := int64(10)
	for name, tc := range map[string]struct {
		spec cachev1alpha1.CacheInstanceSpec
		want []string
	}{
		"nothing set leaves the server's defaults": {},
		"every knob": {
			spec: cachev1alpha1.CacheInstanceSpec{
				WriteBack: &cachev1alpha1.WriteBack{Threads: i32(8), DirtyHighWatermark: i32(70), DirtyLowWatermark: i32(20)},
				Eviction:  &cachev1alpha1.Eviction{HighWatermark: i32(95), LowWatermark: i32(85)},
				Limits: &cachev1alpha1.Limits{MaxFileSize: &mfs, MaxFiles: &files, WriteWindow: &cachev1alpha1.WriteWindow{
					Multiplier: i32(3), Length: &metav1.Duration{Duration: 90 * time.Minute},
				}},
			},
			want: []string{"--writeback-threads=8", "--dirty-high=70", "--dirty-low=20", "--evict-high=95",
				"--evict-low=85", "--max-file-size=1073741824", "--max-files=10",
				"--write-window-multiplier=3", "--write-window-length=5400s"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			inst := &cachev1alpha1.CacheInstance{Spec: tc.spec}
			if diff := cmp.Diff(tc.want, tunableArgs(Tunables(inst))); diff != "" {
				t.Errorf("tunableArgs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKnobsTakenOutGoBackToTheDefault checks that every knob a spec leaves
// unset is sent as zero, the server's default, so that a knob taken out of
// the spec, such as a limit, does not stay on running servers.
func TestKnobsTakenOutGoBackToTheDefault(t *testing.T) {
	files := int64(10)
	inst := &cachev1alpha1.CacheInstance{Spec: cachev1alpha1.CacheInstanceSpec{Limits: &cachev1alpha1.Limits{MaxFiles: &files}}}
	got := Tunables(inst)
	if got.MaxFiles == nil || *got.MaxFiles != 10 {
		t.Errorf("MaxFiles = %v, want 10", got.MaxFiles)
	}
	for name, v := range map[string]any{
		"WriteBackThreads": got.WriteBackThreads, "DirtyHighWatermarkPercent": got.DirtyHighWatermarkPercent,
		"DirtyLowWatermarkPercent": got.DirtyLowWatermarkPercent, "EvictHighWatermarkPercent": got.EvictHighWatermarkPercent,
		"EvictLowWatermarkPercent": got.EvictLowWatermarkPercent, "MaxFileSize": got.MaxFileSize,
		"WriteWindowMultiplier": got.WriteWindowMultiplier,
	} {
		switch p := v.(type) {
		case *int:
			if p == nil || *p != 0 {
				t.Errorf("%s = %v, want 0", name, p)
			}
		case *int64:
			if p == nil || *p != 0 {
				t.Errorf("%s = %v, want 0", name, p)
			}
		case *float64:
			if p == nil || *p != 0 {
				t.Errorf("%s = %v, want 0", name, p)
			}
		}
	}
	if diff := cmp.Diff([]string{"--max-files=10"}, tunableArgs(got)); diff != "" {
		t.Errorf("tunableArgs (-want +got):\n%s", diff)
	}
}
