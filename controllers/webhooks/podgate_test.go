package webhooks_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// TestPodGateFailsClosedForPodsWithDirectives installs the webhooks as
// the chart does, with no manager to answer them: a pod that carries
// DataWarp directives must not be made without them turned into its
// cache (it would run without the storage it asks for), while every other
// pod of the cluster, those that use an instance by its label included,
// is made as if burstcache were not there.
func TestPodGateFailsClosedForPodsWithDirectives(t *testing.T) {
	cs := withoutManager(t)
	ctx := t.Context()
	const ns = "jobs"
	createNamespace(t, cs, ns, nil)
	pod := func(name string, labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "job", Image: "busybox"}}},
		}
	}
	const directive = "#DW jobdw capacity=1GiB access_mode=striped type=scratch"
	for name, p := range map[string]*corev1.Pod{
		"plain":             pod("plain", nil, nil),
		"annotated":         pod("annotated", nil, map[string]string{"team": "climate"}),
		"using an instance": pod("labelled", map[string]string{cachev1alpha1.LabelInstance: "run-42"}, nil),
	} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Errorf("creating a %s pod: %v", name, err)
		}
	}
	for _, key := range []string{cachev1alpha1.AnnotationDirective, cachev1alpha1.AnnotationDirectiveAlias} {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("directed", nil, map[string]string{key: directive}), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), unanswered) {
			t.Errorf("creating a pod with directives in %s: %v, want it refused for want of the webhook", key, err)
		}
	}
}
