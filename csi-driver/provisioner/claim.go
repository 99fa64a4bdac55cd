package provisioner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/instances"
	"github.com/burstcache/burstcache/csi-driver/params"
)

// claimReconciler provisions a PV for each pending claim of a burstcache
// StorageClass.
type claimReconciler struct{ *Provisioner }

// Reconcile provisions the claim's volume if the claim is pending, its
// class is burstcache's and its binding mode allows provisioning now.
func (r *claimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	sc, err := r.classToProvision(ctx, pvc)
	if err != nil || sc == nil {
		return ctrl.Result{}, err
	}
	exists, err := r.volumeExists(ctx, pvc)
	if err != nil || exists {
		return ctrl.Result{}, err
	}
	return r.provision(ctx, pvc, sc)
}

// classToProvision returns the claim's StorageClass if the claim is one
// this provisioner must provision now, else nil.
func (r *claimReconciler) classToProvision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*storagev1.StorageClass, error) {
	if pvc.Spec.VolumeName != "" || !pvc.DeletionTimestamp.IsZero() || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil, nil
	}
	if !provisionerMatches(pvc) {
		return nil, nil
	}
	sc := &storagev1.StorageClass{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, sc)
	if apierrors.IsNotFound(err) || (err == nil && !ours(sc)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading StorageClass %s: %w", *pvc.Spec.StorageClassName, err)
	}
	if waitsForConsumer(sc) && pvc.Annotations[AnnotationSelectedNode] == "" {
		return nil, nil
	}
	return sc, nil
}

// provisionerMatches: when the PV controller named a provisioner for the
// claim, it must be this driver.
func provisionerMatches(pvc *corev1.PersistentVolumeClaim) bool {
	for _, a := range []string{AnnotationStorageProvisioner, AnnotationBetaStorageProvisioner} {
		if v, ok := pvc.Annotations[a]; ok && v != cachev1alpha1.DriverName {
			return false
		}
	}
	return true
}

func waitsForConsumer(sc *storagev1.StorageClass) bool {
	return sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// volumeExists reports whether the claim's PV was made already.
func (r *claimReconciler) volumeExists(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	err := r.Client.Get(ctx, client.ObjectKey{Name: volumeName(pvc)}, &corev1.PersistentVolume{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading PersistentVolume %s: %w", volumeName(pvc), err)
	}
	return true, nil
}

// provision creates the volume's instance, then its PV. Input that cannot
// be honoured is an Event on the claim and no PV; the claim stays Pending
// until it or its class changes. A named instance that does not exist yet
// is looked for again later.
func (r *claimReconciler) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (ctrl.Result, error) {
	vol, err := r.createVolume(ctx, pvc, sc)
	switch {
	case errors.Is(err, instances.ErrNotFound):
		r.refuse(pvc, err)
		return ctrl.Result{RequeueAfter: 6 * r.Options.RetryInterval}, nil
	case errors.Is(err, instances.ErrInvalid) || errors.Is(err, instances.ErrNoCapacity) || errors.Is(err, instances.ErrConflict):
		r.refuse(pvc, err)
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	pv := buildVolume(pvc, sc, vol)
	ctrl.LoggerFrom(ctx).Info("Creating a PersistentVolume", "pv", pv.Name, "volumeHandle", vol.ID)
	if err := r.Client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("creating PersistentVolume %s: %w", pv.Name, err)
	}
	r.Recorder.Eventf(pvc, pv, corev1.EventTypeNormal, ReasonProvisioningSucceeded, "Provision",
		"Successfully provisioned volume %s (%s)", pv.Name, vol.ID)
	return ctrl.Result{}, nil
}

func (r *claimReconciler) createVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) (instances.Volume, error) {
	p, err := params.Parse(sc.Parameters, pvc.Annotations)
	if err != nil {
		return instances.Volume{}, err
	}
	if m := pvc.Spec.VolumeMode; m != nil && *m == corev1.PersistentVolumeBlock {
		return instances.Volume{}, fmt.Errorf("%w: burstcache volumes are file systems; volumeMode Block is not offered", instances.ErrInvalid)
	}
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok || size.Sign() <= 0 {
		return instances.Volume{}, fmt.Errorf("%w: the claim requests no storage", instances.ErrInvalid)
	}
	return r.instances().Create(ctx, instances.Request{
		Name: volumeName(pvc), Namespace: pvc.Namespace, Claim: pvc.Name, Capacity: size, Params: p,
		ReclaimPolicy: string(reclaimPolicy(sc)),
	})
}

func (r *claimReconciler) refuse(pvc *corev1.PersistentVolumeClaim, err error) {
	r.Recorder.Eventf(pvc, nil, corev1.EventTypeWarning, ReasonProvisioningFailed, "Provision",
		"Failed to provision volume with StorageClass %q: %v", *pvc.Spec.StorageClassName, err)
}

// volumeName is the name of the claim's PV, as external-provisioner makes
// it.
func volumeName(pvc *corev1.PersistentVolumeClaim) string {
	return "pvc-" + string(pvc.UID)
}
