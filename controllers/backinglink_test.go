package controllers_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Backing path through a symbolic link", func() {
	It("starts no server on a link that leads out of the prefix the pool granted", func() {
		w := newWorld()
		By("planting, in the namespace's own directory, a link to a project it was not granted")
		other := w.hostPath(mountAt + "/projects/" + w.ns + "-other")
		Expect(os.MkdirAll(other, 0o755)).To(Succeed())
		Expect(os.Symlink("../"+filepath.Base(other), w.hostPath(w.backing+"/escape"))).To(Succeed())

		By("asking for a cache of the link, which admission can only compare as a string")
		inst := w.instance("64Mi")
		inst.Spec.Backing.Path = cachev1alpha1.AbsolutePath(w.backing + "/escape")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		var pods []corev1.Pod
		Eventually(func() []corev1.Pod { pods = serverPods(inst); return pods }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(1))
		Expect(pods[0].Spec.Containers[0].Args).To(ContainElement("--backing-beneath=" + w.backing))

		By("the server refusing to follow the link out of the prefix")
		out := kl.RunFailing(ctx, &pods[0])
		Expect(out).To(ContainSubstring("leads out of"))
		Expect(os.ReadDir(other)).To(BeEmpty())
	})
})
