package provisioner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// volumeReconciler deletes the volumes of PVs this provisioner made with
// reclaim policy Delete, once their claim is gone or the PV is deleted, and
// only then lets the PV go.
type volumeReconciler struct{ *Provisioner }

// Reconcile deletes a released volume, waiting until its instance wrote
// its data back and went.
func (r *volumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !provisionedHere(pv) || !controllerutil.ContainsFinalizer(pv, Finalizer) || pv.Spec.CSI == nil ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return ctrl.Result{}, nil
	}
	released, err := r.released(ctx, pv)
	if err != nil || !released {
		return ctrl.Result{}, err
	}
	gone, err := r.instances().Delete(ctx, pv.Spec.CSI.VolumeHandle)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting the volume of PersistentVolume %s: %w", pv.Name, err)
	}
	if !gone {
		ctrl.LoggerFrom(ctx).Info("Waiting for the volume's instance to write back and go", "volumeHandle", pv.Spec.CSI.VolumeHandle)
		return ctrl.Result{RequeueAfter: r.Options.RetryInterval}, nil
	}
	return ctrl.Result{}, r.deleteVolume(ctx, pv)
}

// released reports whether the PV's volume is to be deleted: the PV
// controller released it, or its claim is gone (read from the API server,
// since a claim the cache still holds may have just been deleted, and one
// it does not hold yet may have just been made). A PV deleted while its
// claim is still bound waits, as it does with external-provisioner: pods
// may still use it.
func (r *volumeReconciler) released(ctx context.Context, pv *corev1.PersistentVolume) (bool, error) {
	if pv.Status.Phase == corev1.VolumeReleased {
		return true, nil
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return !pv.DeletionTimestamp.IsZero(), nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading the claim of PersistentVolume %s: %w", pv.Name, err)
	}
	return ref.UID != "" && pvc.UID != ref.UID, nil
}

// deleteVolume lets the PV go once its volume is gone.
func (r *volumeReconciler) deleteVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	patch := client.MergeFrom(pv.DeepCopy())
	controllerutil.RemoveFinalizer(pv, Finalizer)
	if err := r.Client.Patch(ctx, pv, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer of PersistentVolume %s: %w", pv.Name, err)
	}
	r.Recorder.Eventf(pv, nil, corev1.EventTypeNormal, ReasonVolumeDeleted, "Delete", "Volume %s deleted", pv.Spec.CSI.VolumeHandle)
	if pv.DeletionTimestamp.IsZero() {
		ctrl.LoggerFrom(ctx).Info("Deleting the PersistentVolume", "pv", pv.Name)
		if err := r.Client.Delete(ctx, pv); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
		}
	}
	return nil
}

// provisionedHere reports whether this driver made the PV.
func provisionedHere(pv *corev1.PersistentVolume) bool {
	return pv.Annotations[AnnotationProvisionedBy] == cachev1alpha1.DriverName
}
