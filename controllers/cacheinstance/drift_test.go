package cacheinstance

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// TestLiveFlagsAreTheTunables holds liveFlags to the flags tunableArgs
// makes: a knob added to one and not the other would make every pod look
// outdated after a change of it, or a flag that needs a restart look live.
func TestLiveFlagsAreTheTunables(t *testing.T) {
	i32, length := int32(7), metav1.Duration{Duration: 3600e9}
	inst := &cachev1alpha1.CacheInstance{Spec: cachev1alpha1.CacheInstanceSpec{
		WriteBack: &cachev1alpha1.WriteBack{Threads: &i32, DirtyHighWatermark: &i32, DirtyLowWatermark: &i32},
		Eviction:  &cachev1alpha1.Eviction{HighWatermark: &i32, LowWatermark: &i32},
		Limits: &cachev1alpha1.Limits{
			MaxFileSize: ptrTo(resource.MustParse("1Gi")), MaxFiles: ptrTo(int64(9)),
			WriteWindow: &cachev1alpha1.WriteWindow{Multiplier: &i32, Length: &length},
		},
	}}
	var names []string
	for _, a := range tunableArgs(Tunables(inst)) {
		name, _, _ := strings.Cut(a, "=")
		names = append(names, name)
	}
	if strings.Join(names, " ") != strings.Join(liveFlags, " ") {
		t.Errorf("tunableArgs makes flags %v, liveFlags are %v", names, liveFlags)
	}
}

func TestPodDrift(t *testing.T) {
	want := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers:   []corev1.Container{{Name: "prepare", Image: "bc:2", Command: []string{"burstcache", "manager", "--uid=5"}}},
		Containers:       []corev1.Container{{Name: "server", Image: "bc:2", ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"--a=1", "--dirty-high=50"}}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
	}}
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
		want []string
	}{
		{"as made", func(*corev1.Pod) {}, nil},
		{"live knob changed since", func(p *corev1.Pod) { p.Spec.Containers[0].Args[1] = "--dirty-high=80" }, nil},
		{"live knob set only now", func(p *corev1.Pod) { p.Spec.Containers[0].Args = p.Spec.Containers[0].Args[:1] }, nil},
		{"what admission adds", func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "sa-secret"})
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "mesh:1"})
		}, nil},
		{"older image", func(p *corev1.Pod) { p.Spec.InitContainers[0].Image, p.Spec.Containers[0].Image = "bc:1", "bc:1" },
			[]string{"prepare image bc:1, now bc:2", "server image bc:1, now bc:2"}},
		{"defaulted pull policy", func(p *corev1.Pod) { p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways },
			[]string{"server pull policy Always, now IfNotPresent"}},
		{"other argument", func(p *corev1.Pod) { p.Spec.Containers[0].Args[0] = "--a=0" },
			[]string{"server arguments --a=0, now --a=1"}},
		{"other command", func(p *corev1.Pod) { p.Spec.InitContainers[0].Command[2] = "--uid=6" },
			[]string{"prepare arguments --uid=6, now --uid=5"}},
		{"no pull secret", func(p *corev1.Pod) { p.Spec.ImagePullSecrets = nil }, []string{"no image pull secret regcred"}},
		{"no server container", func(p *corev1.Pod) { p.Spec.Containers = nil }, []string{"no container server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := want.DeepCopy()
			tc.edit(pod)
			if got := podDrift(pod, want); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("podDrift = %q, want %q", got, tc.want)
			}
		})
	}
}
