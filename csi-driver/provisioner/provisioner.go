package provisioner

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/instances"
)

// Annotations and finalizers of the external-provisioner contract.
const (
	// AnnotationProvisionedBy on a PV names the provisioner that made it.
	AnnotationProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// AnnotationStorageProvisioner on a PVC names the provisioner the PV
	// controller expects to provision it.
	AnnotationStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// AnnotationBetaStorageProvisioner is its deprecated form.
	AnnotationBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnotationSelectedNode on a PVC of a WaitForFirstConsumer class is set
	// by the scheduler once it picked the first consumer's node.
	AnnotationSelectedNode = "volume.kubernetes.io/selected-node"

	// Finalizer holds a PV with reclaim policy Delete until its volume is
	// deleted, that is until its CacheInstance wrote its data back and went.
	Finalizer = "provisioner.csi.burstcache.io/volume"
)

// Event reasons on claims, as external-provisioner names them.
const (
	ReasonProvisioningFailed    = "ProvisioningFailed"
	ReasonProvisioningSucceeded = "ProvisioningSucceeded"
	ReasonVolumeDeleted         = "VolumeDeleted"
)

// Options configure the provisioner.
type Options struct {
	// RetryInterval is how often a volume whose instance is still being
	// torn down is looked at again. Default 5s.
	RetryInterval time.Duration
}

// Provisioner provisions and deletes burstcache PVs.
type Provisioner struct {
	// Client reads through the manager's cache and writes.
	Client client.Client
	// APIReader reads claims from the API server, so that a claim deleted a
	// moment ago is not taken for a live one.
	APIReader client.Reader
	// Recorder records Events on claims and PVs.
	Recorder events.EventRecorder
	// Options are the provisioner's settings.
	Options Options
}

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cacheinstances,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the claim and volume controllers with mgr.
func (p *Provisioner) SetupWithManager(mgr ctrl.Manager) error {
	if p.Options.RetryInterval == 0 {
		p.Options.RetryInterval = 5 * time.Second
	}
	err := ctrl.NewControllerManagedBy(mgr).
		For(&corev1.PersistentVolumeClaim{}).
		Named("burstcache-provisioner").
		Complete(&claimReconciler{p})
	if err != nil {
		return fmt.Errorf("setting up the claim controller: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.PersistentVolume{}).
		// The PV controller marks a PV Released when its claim goes; without
		// it (or before it), the claim's deletion is the signal.
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(claimToVolume)).
		Named("burstcache-volume-deleter").
		Complete(&volumeReconciler{p})
	if err != nil {
		return fmt.Errorf("setting up the volume controller: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.CacheInstance{}, builder.WithPredicates(predicate.NewPredicateFuncs(dynamic))).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(claimToInstance)).
		Named("burstcache-orphaned-instances").
		Complete(&orphanReconciler{p})
	if err != nil {
		return fmt.Errorf("setting up the orphaned instance controller: %w", err)
	}
	return nil
}

// dynamic selects the instances made for dynamic volumes.
func dynamic(o client.Object) bool {
	return o.GetAnnotations()[instances.AnnotationVolume] == o.GetName()
}

// claimToInstance maps a claim to the instance of its dynamic volume.
func claimToInstance(_ context.Context, o client.Object) []reconcile.Request {
	pvc := o.(*corev1.PersistentVolumeClaim)
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: pvc.Namespace, Name: volumeName(pvc)}}}
}

func (p *Provisioner) instances() *instances.Instances {
	return &instances.Instances{Client: p.Client}
}

func claimToVolume(_ context.Context, o client.Object) []reconcile.Request {
	pvc := o.(*corev1.PersistentVolumeClaim)
	names := []string{volumeName(pvc)}
	if pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != names[0] {
		names = append(names, pvc.Spec.VolumeName)
	}
	reqs := make([]reconcile.Request, len(names))
	for i, n := range names {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKey{Name: n}}
	}
	return reqs
}

// ours reports whether a StorageClass is burstcache's.
func ours(sc *storagev1.StorageClass) bool {
	return sc.Provisioner == cachev1alpha1.DriverName
}
