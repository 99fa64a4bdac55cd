package provisioner

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/instances"
)

// orphanReconciler deletes the instance of a dynamic volume of a Delete
// class whose claim went before the volume's PV was made, such as when the
// claim is deleted while the provisioner was between the two steps: no PV
// would ever delete it. Its own finalizer still writes its data back
// first. Instances of Retain classes, and those the CSI controller service
// made for the sidecar (which cleans up after itself), are left alone.
type orphanReconciler struct{ *Provisioner }

// Reconcile deletes an orphaned dynamic instance.
func (r *orphanReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	inst := &cachev1alpha1.CacheInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	claimNS, claim, ok := strings.Cut(inst.Annotations[instances.AnnotationClaim], "/")
	if !ok || inst.Annotations[instances.AnnotationVolume] != inst.Name || !inst.DeletionTimestamp.IsZero() ||
		inst.Annotations[instances.AnnotationReclaimPolicy] != string(corev1.PersistentVolumeReclaimDelete) {
		return ctrl.Result{}, nil
	}
	orphan, err := r.orphaned(ctx, inst.Name, client.ObjectKey{Namespace: claimNS, Name: claim})
	if err != nil || !orphan {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the instance of a claim that went before its volume was made", "claim", claimNS+"/"+claim)
	err = r.Client.Delete(ctx, inst, client.Preconditions{UID: &inst.UID})
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("deleting orphaned CacheInstance %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// orphaned reports whether no PV named volume exists and the claim is
// gone or is another claim of the same name. The cache answers the common
// case, a volume that exists; the API server confirms an orphan.
func (r *orphanReconciler) orphaned(ctx context.Context, volume string, claim client.ObjectKey) (bool, error) {
	for _, rd := range []client.Reader{r.Client, r.APIReader} {
		live, err := r.volumeOrClaim(ctx, rd, volume, claim)
		if err != nil || live {
			return false, err
		}
	}
	return true, nil
}

func (r *orphanReconciler) volumeOrClaim(ctx context.Context, rd client.Reader, volume string, claim client.ObjectKey) (bool, error) {
	err := rd.Get(ctx, client.ObjectKey{Name: volume}, &corev1.PersistentVolume{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err == nil, client.IgnoreNotFound(err)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err = rd.Get(ctx, claim, pvc)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading claim %s: %w", claim, err)
	}
	return volumeName(pvc) == volume, nil
}
