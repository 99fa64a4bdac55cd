package webhooks_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// TestNamespaceGuardFailsClosedForNamespacesWithInstances installs the
// webhooks as the chart does, with no manager to answer them: a namespace
// the manager labelled as holding instances must not be deleted, since
// its instances' servers would go before their data is written back,
// while every other namespace of the cluster is deleted as if burstcache
// were not there.
func TestNamespaceGuardFailsClosedForNamespacesWithInstances(t *testing.T) {
	cs := withoutManager(t)
	ctx := t.Context()
	createNamespace(t, cs, "scratch", nil)
	createNamespace(t, cs, "labelled-otherwise", map[string]string{cachev1alpha1.LabelHoldsInstances: "false"})
	createNamespace(t, cs, "climate", map[string]string{cachev1alpha1.LabelHoldsInstances: "true"})

	for _, name := range []string{"scratch", "labelled-otherwise"} {
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s, which holds no instance: %v", name, err)
		}
	}
	err := cs.CoreV1().Namespaces().Delete(ctx, "climate", metav1.DeleteOptions{})
	if err == nil || !strings.Contains(err.Error(), unanswered) {
		t.Fatalf("deleting a namespace that holds instances: %v, want it refused for want of the webhook", err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "climate", metav1.GetOptions{})
	if err != nil || !ns.DeletionTimestamp.IsZero() {
		t.Fatalf("the namespace that holds instances after the refusal: %v, %v", ns.DeletionTimestamp, err)
	}
	// Deletion of a namespace ends in its controller, which does not run
	// here: one being deleted is what admission let through.
	gone, err := cs.CoreV1().Namespaces().Get(ctx, "scratch", metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) || err == nil && gone.DeletionTimestamp.IsZero() {
		t.Errorf("the namespace that holds no instance after its deletion: %v", err)
	}
}
