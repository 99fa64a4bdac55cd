package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestDefault(t *testing.T) {
	pool := testPool()
	pool.Spec.Defaults = &cachev1alpha1.InstanceDefaults{
		WriteBack: &cachev1alpha1.WriteBackDefaults{Threads: 4, DirtyHighWatermark: 60, DirtyLowWatermark: 30},
		Eviction:  &cachev1alpha1.EvictionDefaults{HighWatermark: 90, LowWatermark: 80},
		Limits: &cachev1alpha1.LimitsDefaults{MaxFiles: ptr(int64(500)),
			WriteWindow: &cachev1alpha1.WriteWindowDefaults{Multiplier: 10, Length: &metav1.Duration{Duration: 24 * time.Hour}}},
		Teardown: &cachev1alpha1.TeardownDefaults{Timeout: &metav1.Duration{Duration: time.Hour}},
	}
	for name, tc := range map[string]struct {
		spec func(*cachev1alpha1.CacheInstanceSpec)
		want func(*cachev1alpha1.CacheInstanceSpec)
	}{
		"fills every unset knob": {
			spec: func(*cachev1alpha1.CacheInstanceSpec) {},
			want: func(s *cachev1alpha1.CacheInstanceSpec) {
				s.WriteBack = &cachev1alpha1.WriteBack{Threads: ptr(int32(4)), DirtyHighWatermark: ptr(int32(60)), DirtyLowWatermark: ptr(int32(30))}
				s.Eviction = &cachev1alpha1.Eviction{HighWatermark: ptr(int32(90)), LowWatermark: ptr(int32(80))}
				s.Limits = &cachev1alpha1.Limits{MaxFiles: ptr(int64(500)), MaxFileSize: ptr(resource.MustParse("1Ti")),
					WriteWindow: &cachev1alpha1.WriteWindow{Multiplier: ptr(int32(10)), Length: &metav1.Duration{Duration: 24 * time.Hour}}}
				s.Teardown = &cachev1alpha1.Teardown{Timeout: &metav1.Duration{Duration: time.Hour}}
			},
		},
		"keeps what the user set, and never sets a policy": {
			spec: func(s *cachev1alpha1.CacheInstanceSpec) {
				s.WriteBack = &cachev1alpha1.WriteBack{Threads: ptr(int32(2)), DirtyHighWatermark: ptr(int32(50)), DirtyLowWatermark: ptr(int32(10))}
				s.Teardown = &cachev1alpha1.Teardown{Timeout: &metav1.Duration{Duration: time.Minute}}
			},
			want: func(s *cachev1alpha1.CacheInstanceSpec) {
				s.Eviction = &cachev1alpha1.Eviction{HighWatermark: ptr(int32(90)), LowWatermark: ptr(int32(80))}
				s.Limits = &cachev1alpha1.Limits{MaxFiles: ptr(int64(500)), MaxFileSize: ptr(resource.MustParse("1Ti")),
					WriteWindow: &cachev1alpha1.WriteWindow{Multiplier: ptr(int32(10)), Length: &metav1.Duration{Duration: 24 * time.Hour}}}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			inst := testInstance()
			tc.spec(&inst.Spec)
			want := inst.DeepCopy()
			tc.want(&want.Spec)
			Default(inst, pool)
			if diff := cmp.Diff(want.Spec, inst.Spec); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchingNodes(t *testing.T) {
	pool := testPool()
	pool.Spec.Nodes = &cachev1alpha1.NodePlacement{
		NodeSelector: map[string]string{"nvme": "true"},
		Tolerations:  []corev1.Toleration{{Key: "io", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
	}
	node := func(name string, labels map[string]string, taint string, cordoned bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		n.Spec.Unschedulable = cordoned
		if taint != "" {
			n.Spec.Taints = []corev1.Taint{{Key: taint, Effect: corev1.TaintEffectNoSchedule}}
		}
		return n
	}
	ssd := map[string]string{"nvme": "true"}
	nodes := []corev1.Node{
		node("b-ssd", ssd, "", false),
		node("a-ssd-tainted-io", ssd, "io", false),
		node("c-ssd-tainted-gpu", ssd, "gpu", false),
		node("d-ssd-cordoned", ssd, "", true),
		node("e-hdd", map[string]string{"nvme": "false"}, "", false),
	}
	want := []string{"a-ssd-tainted-io", "b-ssd"}
	if diff := cmp.Diff(want, MatchingNodes(pool, nodes)); diff != "" {
		t.Errorf("MatchingNodes (-want +got):\n%s", diff)
	}
}
