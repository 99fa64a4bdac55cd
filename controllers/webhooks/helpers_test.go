package webhooks_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/burstcache/burstcache/test/apiserver"
)

// unanswered is what the API server says of a call to a webhook that no
// manager answers.
const unanswered = "failed calling webhook"

// withoutManager starts an API server with the CRDs and the webhooks as
// the chart installs them, and no manager to answer them, as while it is
// down or being upgraded.
func withoutManager(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	env, cfg, err := apiserver.Start(apiserver.Options{CRDs: true, Webhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// createNamespace makes the namespace name with labels.
func createNamespace(t *testing.T, cs *kubernetes.Clientset, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
