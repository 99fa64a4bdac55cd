package cacheinstance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// protect makes sure a server pod or cache claim carries the protection
// finalizer. Both are created with it; this restores it if someone removed
// it. An object already being deleted is left alone: a finalizer cannot be
// added to it, and the one it has is what holds it.
func (r *Reconciler) protect(ctx context.Context, o client.Object) error {
	if controllerutil.ContainsFinalizer(o, cachev1alpha1.ServerProtectionFinalizer) || !o.GetDeletionTimestamp().IsZero() {
		return nil
	}
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	controllerutil.AddFinalizer(o, cachev1alpha1.ServerProtectionFinalizer)
	if err := r.Client.Patch(ctx, o, patch); err != nil {
		return fmt.Errorf("protecting %s %s: %w", kindOf(o), o.GetName(), err)
	}
	return nil
}

// releaseAndDelete removes the protection finalizer of a server pod or
// cache claim and deletes it.
func (r *Reconciler) releaseAndDelete(ctx context.Context, o client.Object) error {
	if controllerutil.ContainsFinalizer(o, cachev1alpha1.ServerProtectionFinalizer) {
		patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
		controllerutil.RemoveFinalizer(o, cachev1alpha1.ServerProtectionFinalizer)
		if err := r.Client.Patch(ctx, o, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing %s %s: %w", kindOf(o), o.GetName(), err)
		}
	}
	if !o.GetDeletionTimestamp().IsZero() {
		return nil
	}
	err := r.Client.Delete(ctx, o)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", kindOf(o), o.GetName(), err)
	}
	return nil
}

// kindOf names what a protected object is, for errors.
func kindOf(o client.Object) string {
	if _, ok := o.(*corev1.PersistentVolumeClaim); ok {
		return "cache claim"
	}
	return "server pod"
}
