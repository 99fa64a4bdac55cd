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

// protect makes sure a server pod carries the protection finalizer. Pods
// are created with it; this restores it if someone removed it.
func (r *Reconciler) protect(ctx context.Context, pod *corev1.Pod) error {
	if controllerutil.ContainsFinalizer(pod, cachev1alpha1.ServerProtectionFinalizer) {
		return nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	controllerutil.AddFinalizer(pod, cachev1alpha1.ServerProtectionFinalizer)
	if err := r.Client.Patch(ctx, pod, patch); err != nil {
		return fmt.Errorf("protecting server pod %s: %w", pod.Name, err)
	}
	return nil
}

// releaseAndDelete removes the protection finalizer of a server pod and
// deletes it.
func (r *Reconciler) releaseAndDelete(ctx context.Context, pod *corev1.Pod) error {
	if controllerutil.ContainsFinalizer(pod, cachev1alpha1.ServerProtectionFinalizer) {
		patch := client.MergeFrom(pod.DeepCopy())
		controllerutil.RemoveFinalizer(pod, cachev1alpha1.ServerProtectionFinalizer)
		if err := r.Client.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing server pod %s: %w", pod.Name, err)
		}
	}
	if !pod.DeletionTimestamp.IsZero() {
		return nil
	}
	err := r.Client.Delete(ctx, pod)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting server pod %s: %w", pod.Name, err)
	}
	return nil
}
