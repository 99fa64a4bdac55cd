package webhooks

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate--v1-namespace,mutating=false,failurePolicy=ignore,sideEffects=None,groups="",resources=namespaces,verbs=delete,versions=v1,name=vnamespace-v1.cache.burstcache.io,admissionReviewVersions=v1

// NamespaceGuard refuses to delete a namespace that still holds
// CacheInstances. Deleting a namespace deletes its pods, the instances'
// cache servers among them, while the instances' finalizers still wait to
// write dirty data back: the data would be stranded on the servers' disks.
// Deleting the instances first writes everything back; the namespace can
// go once they are gone.
//
// The chart installs it twice: failing closed for namespaces labelled
// LabelHoldsInstances, which the reconciler labels before it makes any
// object of an instance, and failing open for every other namespace of
// the cluster, whose deletion a manager that is down must not stop.
type NamespaceGuard struct {
	// Reader lists CacheInstances; the API server itself (the manager's
	// APIReader), so that an instance created a moment ago is seen.
	Reader client.Reader
}

var _ admission.Validator[*corev1.Namespace] = (*NamespaceGuard)(nil)

// SetupWithManager registers the webhook with mgr's webhook server.
func (g *NamespaceGuard) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Namespace{}).WithValidator(g).Complete()
}

// ValidateCreate allows every namespace.
func (g *NamespaceGuard) ValidateCreate(context.Context, *corev1.Namespace) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate allows every change.
func (g *NamespaceGuard) ValidateUpdate(context.Context, *corev1.Namespace, *corev1.Namespace) (admission.Warnings, error) {
	return nil, nil
}

// guardedListLimit is how many instances a refusal names.
const guardedListLimit = 5

// ValidateDelete refuses to delete ns while CacheInstances live in it.
func (g *NamespaceGuard) ValidateDelete(ctx context.Context, ns *corev1.Namespace) (admission.Warnings, error) {
	var list cachev1alpha1.CacheInstanceList
	if err := g.Reader.List(ctx, &list, client.InNamespace(ns.Name), client.Limit(guardedListLimit)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing CacheInstances of namespace %s: %w", ns.Name, err))
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(list.Items))
	for _, inst := range list.Items {
		names = append(names, inst.Name)
	}
	more := ""
	if list.Continue != "" {
		more = " and more"
	}
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, ns.Name, fmt.Errorf(
		"it holds CacheInstances (%s%s) whose data may not be written back yet: deleting the namespace would stop their cache servers first. "+
			"Delete them (kubectl delete cacheinstances --all -n %s), which writes their data back, then delete the namespace",
		strings.Join(names, ", "), more, ns.Name))
}
