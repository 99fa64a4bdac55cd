package provisioner

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/instances"
)

// buildVolume returns the PV of a claim, as external-provisioner writes it.
func buildVolume(pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, vol instances.Volume) *corev1.PersistentVolume {
	reclaim := reclaimPolicy(sc)
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        volumeName(pvc),
			Annotations: map[string]string{AnnotationProvisionedBy: cachev1alpha1.DriverName},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: vol.Capacity},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              sc.Name,
			MountOptions:                  sc.MountOptions,
			VolumeMode:                    &fs,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:             cachev1alpha1.DriverName,
				VolumeHandle:       vol.ID,
				VolumeAttributes:   vol.Context,
				NodeStageSecretRef: &corev1.SecretReference{Name: vol.SecretName, Namespace: vol.SecretNamespace},
			}},
		},
	}
	if reclaim == corev1.PersistentVolumeReclaimDelete {
		pv.Finalizers = []string{Finalizer}
	}
	return pv
}

// reclaimPolicy is the class's reclaim policy, Delete by default.
func reclaimPolicy(sc *storagev1.StorageClass) corev1.PersistentVolumeReclaimPolicy {
	if sc.ReclaimPolicy != nil {
		return *sc.ReclaimPolicy
	}
	return corev1.PersistentVolumeReclaimDelete
}
