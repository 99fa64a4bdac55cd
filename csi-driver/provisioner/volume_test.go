package provisioner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/instances"
)

func TestBuildVolume(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	tests := map[string]struct {
		reclaim       *corev1.PersistentVolumeReclaimPolicy
		wantReclaim   corev1.PersistentVolumeReclaimPolicy
		wantFinalizer bool
	}{
		"default is Delete, held by the finalizer": {wantReclaim: corev1.PersistentVolumeReclaimDelete, wantFinalizer: true},
		"Retain has no finalizer":                  {reclaim: &retain, wantReclaim: retain},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "team", UID: "1234"},
		Spec:       corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}},
	}
	vol := instances.Volume{ID: "team/pvc-1234", Capacity: resource.MustParse("1Gi"), Context: map[string]string{"subPath": "a"},
		SecretName: "pvc-1234-secret", SecretNamespace: "team"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, ReclaimPolicy: tc.reclaim, MountOptions: []string{"ro"}}
			pv := buildVolume(pvc, sc, vol)
			if pv.Name != "pvc-1234" || pv.Annotations[AnnotationProvisionedBy] != cachev1alpha1.DriverName {
				t.Errorf("name %q, annotations %v", pv.Name, pv.Annotations)
			}
			if pv.Spec.PersistentVolumeReclaimPolicy != tc.wantReclaim || (len(pv.Finalizers) == 1) != tc.wantFinalizer {
				t.Errorf("reclaim %v finalizers %v, want %v with finalizer %v", pv.Spec.PersistentVolumeReclaimPolicy, pv.Finalizers, tc.wantReclaim, tc.wantFinalizer)
			}
			if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID || ref.Namespace != "team" || ref.Name != "data" {
				t.Errorf("claimRef %+v", ref)
			}
			csi := pv.Spec.CSI
			if csi.VolumeHandle != vol.ID || csi.NodeStageSecretRef.Name != vol.SecretName || csi.VolumeAttributes["subPath"] != "a" {
				t.Errorf("csi %+v", csi)
			}
			if pv.Spec.MountOptions[0] != "ro" || pv.Spec.StorageClassName != "fast" || pv.Spec.Capacity.Storage().Cmp(vol.Capacity) != 0 {
				t.Errorf("spec %+v", pv.Spec)
			}
		})
	}
}

func TestProvisionerMatches(t *testing.T) {
	tests := map[string]struct {
		annotations map[string]string
		want        bool
	}{
		"no annotation yet": {want: true},
		"ours":              {annotations: map[string]string{AnnotationStorageProvisioner: cachev1alpha1.DriverName}, want: true},
		"another":           {annotations: map[string]string{AnnotationStorageProvisioner: "example.com/x"}},
		"another, beta":     {annotations: map[string]string{AnnotationBetaStorageProvisioner: "example.com/x"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := provisionerMatches(pvc); got != tc.want {
				t.Errorf("provisionerMatches() = %v, want %v", got, tc.want)
			}
		})
	}
}
