package webhooks_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// TestServerPodGuardFailsClosedForServerPodsOnly installs the webhooks as
// the chart does, with no manager to answer them, as while it is down or
// being upgraded: server pods must still be kept from users (no pod of
// theirs made a server, no exec into one), while every other pod of the
// cluster is made, changed and reached as if burstcache were not there.
func TestServerPodGuardFailsClosedForServerPodsOnly(t *testing.T) {
	cs := withoutManager(t)
	ctx := t.Context()
	const ns = "jobs"
	createNamespace(t, cs, ns, nil)
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "busybox"}}},
		}
	}
	serverLabel := map[string]string{cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer}

	// Other pods: made, relabelled and reached past admission (the exec
	// fails only at the node, which does not exist here).
	plain, err := cs.CoreV1().Pods(ns).Create(ctx, pod("train-0", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a pod of a job: %v", err)
	}
	plain.Labels = map[string]string{"app": "train"}
	if plain, err = cs.CoreV1().Pods(ns).Update(ctx, plain, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("labelling a pod of a job: %v", err)
	}
	if err := execIn(ctx, cs, ns, plain.Name); err == nil || strings.Contains(err.Error(), unanswered) {
		t.Fatalf("exec into a pod of a job: %v, want a failure at the node, not at the webhook", err)
	}
	// A pod named as servers are but without the label is made as any
	// other; the exec into it waits for the webhook, which checks the label.
	named, err := cs.CoreV1().Pods(ns).Create(ctx, pod("scratch-server-0", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a pod named as a server pod: %v", err)
	}
	if err := execIn(ctx, cs, ns, named.Name); err == nil || !strings.Contains(err.Error(), unanswered) {
		t.Errorf("exec into a pod named as a server pod: %v, want it refused for want of the webhook", err)
	}

	// Server pods: neither made nor relabelled into one without the guard.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("impostor", serverLabel), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), unanswered) {
		t.Errorf("creating a pod labelled as a server: %v, want it refused for want of the webhook", err)
	}
	plain.Labels = serverLabel
	if _, err := cs.CoreV1().Pods(ns).Update(ctx, plain, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), unanswered) {
		t.Errorf("labelling a pod as a server: %v, want it refused for want of the webhook", err)
	}
}

// execIn asks the API server to run a command in pod.
func execIn(ctx context.Context, cs *kubernetes.Clientset, ns, pod string) error {
	return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "server", Command: []string{"true"}, Stdout: true}, clientgoscheme.ParameterCodec).
		Do(ctx).Error()
}
