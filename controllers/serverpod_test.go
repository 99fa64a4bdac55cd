package controllers_test

import (
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("What a server pod holds of the backing file system", func() {
	// backingMount returns the server container's mount of the backing
	// file system.
	backingMount := func(pod *corev1.Pod) corev1.VolumeMount {
		GinkgoHelper()
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.Name == "backing" {
				return m
			}
		}
		Fail("the server container does not mount the backing file system")
		return corev1.VolumeMount{}
	}
	serverPod := func(inst *cachev1alpha1.CacheInstance) corev1.Pod {
		GinkgoHelper()
		var pods []corev1.Pod
		Eventually(func() []corev1.Pod { pods = serverPods(inst); return pods }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(1))
		return pods[0]
	}

	// Namespace editors may exec into server pods and give their
	// containers another image: what the container holds, they reach.
	It("mounts only the prefix the pool granted, and the server caches through it", func() {
		w := newWorld()
		Expect(os.MkdirAll(w.hostPath(w.backing+"/run1"), 0o755)).To(Succeed())
		Expect(os.Chown(w.hostPath(w.backing+"/run1"), runAsUID, runAsGID)).To(Succeed())
		inst := w.instance("64Mi")
		inst.Spec.Backing.Path = cachev1alpha1.AbsolutePath(w.backing + "/run1")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		pod := serverPod(inst)
		Expect(backingMount(&pod)).To(And(HaveField("MountPath", w.backing),
			HaveField("SubPath", strings.TrimPrefix(w.backing, mountAt+"/"))))

		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		writeThroughMount(inst, addrs, "out.dat", []byte("written through the cache"))
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(w.hostPath(w.backing + "/run1/out.dat"))).To(BeEquivalentTo("written through the cache"))
	})

	It("mounts the whole file system when the pool granted all of it", func() {
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			p.Spec.BackingFilesystems[0].AccessRules[0].PathPrefixes = []cachev1alpha1.AbsolutePath{mountAt}
		})
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		pod := serverPod(inst)
		Expect(backingMount(&pod)).To(And(HaveField("MountPath", mountAt), HaveField("SubPath", "")))
	})
})
