package controllers_test

import (
	"os"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

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
		By("checking first, as runAs, with the whole file system read-only, that runAs reaches the prefix")
		Expect(pod.Spec.InitContainers).To(ContainElement(And(
			HaveField("Command", ContainElement("--path="+w.backing)),
			HaveField("VolumeMounts", ConsistOf(And(HaveField("Name", "backing"), HaveField("MountPath", mountAt),
				HaveField("SubPath", ""), HaveField("ReadOnly", true)))),
			HaveField("SecurityContext.RunAsUser", BeNil()))))

		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		writeThroughMount(inst, addrs, "out.dat", []byte("written through the cache"))
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(w.hostPath(w.backing + "/run1/out.dat"))).To(BeEquivalentTo("written through the cache"))
	})

	// The server sees the granted directory only, so the directories
	// above it must be checked for it, as runAs, as the job's own walk on
	// the file system would be; and kubelet would make a missing one, as
	// root.
	It("starts no server whose runAs may not search a directory above the prefix, and says why", func() {
		w := newWorld()
		above := w.hostPath(mountAt + "/projects")
		Expect(os.Chmod(above, 0o700)).To(Succeed())
		DeferCleanup(os.Chmod, above, os.FileMode(0o755))
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		pod := serverPod(inst)

		out := kl.RunInitFailing(ctx, &pod)
		Expect(out).To(And(ContainSubstring("cannot reach the granted directory "+w.hostPath(w.backing)), ContainSubstring("permission denied")))
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionServersReady)
			g.Expect(c).NotTo(BeNil())
			return c.Message
		}, 20*time.Second, 200*time.Millisecond).Should(And(ContainSubstring("server-0 could not start (check-backing)"), ContainSubstring("permission denied")))
		Expect(phaseOf(inst)(Default)).To(Equal(cachev1alpha1.PhaseProvisioning))

		By("starting once runAs may search it")
		Expect(os.Chmod(above, 0o755)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
	})

	It("starts no server on a granted prefix that is not there, rather than have it made as root", func() {
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			rule := &p.Spec.BackingFilesystems[0].AccessRules[0]
			rule.PathPrefixes = append(rule.PathPrefixes, cachev1alpha1.AbsolutePath(mountAt+"/missing-"+strconv.FormatInt(time.Now().UnixNano(), 36)))
		})
		prefix := string(w.pool.Spec.BackingFilesystems[0].AccessRules[0].PathPrefixes[1])
		inst := w.instance("64Mi")
		inst.Spec.Backing.Path = cachev1alpha1.AbsolutePath(prefix + "/run1")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		pod := serverPod(inst)
		Expect(kl.RunInitFailing(ctx, &pod)).To(ContainSubstring("no such file or directory"))
		Expect(w.hostPath(prefix)).NotTo(BeADirectory())
	})

	It("mounts the whole file system when the pool granted all of it", func() {
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			p.Spec.BackingFilesystems[0].AccessRules[0].PathPrefixes = []cachev1alpha1.AbsolutePath{mountAt}
		})
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		pod := serverPod(inst)
		Expect(backingMount(&pod)).To(And(HaveField("MountPath", mountAt), HaveField("SubPath", "")))
		Expect(pod.Spec.InitContainers).To(HaveLen(1), "nothing to check above the mount path")
	})
})
