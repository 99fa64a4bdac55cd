package cacheinstance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// markNamespace labels the instance's namespace as one that holds
// instances, before any of the instance's objects is made: the guard of
// namespace deletion then refuses to delete it even while the manager is
// down, since deleting it would stop the instance's servers before their
// data is written back.
func (r *Reconciler) markNamespace(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.nsLabels[cachev1alpha1.LabelHoldsInstances] == "true" {
		return ctrl.Result{}, nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.inst.Namespace}}
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels = map[string]string{cachev1alpha1.LabelHoldsInstances: "true"}
	err := r.Client.Patch(ctx, ns, patch)
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		// A policy of the cluster keeps the label off: the guard of the
		// namespace fails open, as before there was one, which is no
		// reason to hold the instance back.
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonNamespaceUnguarded, "LabelNamespace",
			"Namespace %s cannot be labelled %s=true (%v): while the manager is down, nothing keeps it from being deleted before this instance's data is written back",
			s.inst.Namespace, cachev1alpha1.LabelHoldsInstances, err)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("labelling namespace %s as holding instances: %w", s.inst.Namespace, err)
	}
	return ctrl.Result{}, nil
}
