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
