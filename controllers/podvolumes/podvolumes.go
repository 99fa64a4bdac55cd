package podvolumes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// Uses is what a pod mounts through burstcache CSI volumes.
type Uses struct {
	// Instances are the names of the instances, in the pod's namespace,
	// that bound volumes of the pod name.
	Instances []string
	// Unbound reports that a volume of an Immediate burstcache class has no
	// PV yet, so its instance cannot be Ready.
	Unbound bool
}

// Find returns what the pod mounts through burstcache CSI volumes.
func Find(ctx context.Context, r client.Reader, pod *corev1.Pod) (Uses, error) {
	var u Uses
	for _, v := range pod.Spec.Volumes {
		claim, sc := claimOf(pod, v)
		if claim == "" {
			continue
		}
		if err := u.add(ctx, r, pod.Namespace, claim, sc); err != nil {
			return Uses{}, err
		}
	}
	return u, nil
}

// claimOf returns the claim a volume uses and, for an ephemeral volume
// whose claim may not exist yet, the class of its template.
func claimOf(pod *corev1.Pod, v corev1.Volume) (string, *string) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, nil
	case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
		// The name the ephemeral volume controller gives the claim.
		return pod.Name + "-" + v.Name, v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
	}
	return "", nil
}

func (u *Uses) add(ctx context.Context, r client.Reader, ns, claim string, sc *string) error {
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc)
	switch {
	case err == nil:
		sc = pvc.Spec.StorageClassName
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading PVC %s: %w", claim, err)
	}
	class, err := burstcacheClass(ctx, r, sc)
	if err != nil || (class != nil && waitsForConsumer(class)) {
		return err
	}
	if pvc.Spec.VolumeName == "" {
		u.Unbound = u.Unbound || class != nil
		return nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return client.IgnoreNotFound(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != cachev1alpha1.DriverName {
		return nil
	}
	if pvNS, name, err := volume.ParseID(pv.Spec.CSI.VolumeHandle); err == nil && pvNS == ns {
		u.Instances = append(u.Instances, name)
	}
	return nil
}

// burstcacheClass returns the named StorageClass if it is burstcache's.
func burstcacheClass(ctx context.Context, r client.Reader, name *string) (*storagev1.StorageClass, error) {
	if name == nil || *name == "" {
		return nil, nil
	}
	sc := &storagev1.StorageClass{}
	err := r.Get(ctx, client.ObjectKey{Name: *name}, sc)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading StorageClass %s: %w", *name, err)
	}
	if sc.Provisioner != cachev1alpha1.DriverName {
		return nil, nil
	}
	return sc, nil
}

func waitsForConsumer(sc *storagev1.StorageClass) bool {
	return sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}
