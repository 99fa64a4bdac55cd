package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/mountkey"
)

var _ = Describe("The mount key", func() {
	It("is made once, kept by every later manager, and refused with the Secret's name when it is no key", func() {
		key := client.ObjectKey{Namespace: newWorld().ns, Name: cachev1alpha1.MountKeySecretName}
		pub, err := mountkey.Ensure(ctx, k8sClient, k8sClient, key)
		Expect(err).NotTo(HaveOccurred())
		s := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key, s)).To(Succeed())
		Expect(control.MountPublicKey(string(s.Data[cachev1alpha1.MountKeySecretKey]))).To(Equal(pub))

		By("keeping the key a manager made before, which mounts and servers use")
		Expect(mountkey.Ensure(ctx, k8sClient, k8sClient, key)).To(Equal(pub))

		By("refusing a Secret that holds no key, rather than replacing it")
		s.Data[cachev1alpha1.MountKeySecretKey] = []byte("not a key")
		Expect(k8sClient.Update(ctx, s)).To(Succeed())
		_, err = mountkey.Ensure(ctx, k8sClient, k8sClient, key)
		Expect(err).To(MatchError(ContainSubstring(key.String())))
		Expect(k8sClient.Get(ctx, key, s)).To(Succeed())
		Expect(string(s.Data[cachev1alpha1.MountKeySecretKey])).To(Equal("not a key"))
	})
})
