package controllers_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("The CSIDriver manifest", func() {
	It("is accepted by the API server and offers no inline volumes and no ownership changes", func() {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "csi", "csidriver.yaml"))
		Expect(err).NotTo(HaveOccurred())
		d := &storagev1.CSIDriver{}
		Expect(yaml.UnmarshalStrict(raw, d)).To(Succeed())
		Expect(k8sClient.Create(ctx, d, client.FieldValidation(metav1.FieldValidationStrict))).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, d)).To(Succeed()) })
		Expect(d.Name).To(Equal(cachev1alpha1.DriverName))
		Expect(d.Spec.AttachRequired).To(HaveValue(BeFalse()))
		Expect(d.Spec.PodInfoOnMount).To(HaveValue(BeTrue()))
		Expect(d.Spec.FSGroupPolicy).To(HaveValue(Equal(storagev1.NoneFSGroupPolicy)))
		Expect(d.Spec.VolumeLifecycleModes).To(Equal([]storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}))
	})
})
