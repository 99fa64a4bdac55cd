package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Server pods", func() {
	It("reach an NFS backing file system at its mount path, and carry the pool's tolerations", func() {
		toleration := corev1.Toleration{Key: "io-only", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			p.Spec.Nodes.Tolerations = []corev1.Toleration{toleration}
			fs := &p.Spec.BackingFilesystems[0]
			fs.HostPath, fs.NFS = nil, &cachev1alpha1.NFSSource{Server: "nfs.example", Export: "/export/pfs"}
		})
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func() []corev1.Pod { return serverPods(inst) }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(1))
		pod := serverPods(inst)[0]
		Expect(pod.Spec.Tolerations).To(ContainElement(toleration))
		Expect(pod.Spec.Volumes).To(ContainElement(And(HaveField("Name", "backing"),
			HaveField("VolumeSource.NFS", Equal(&corev1.NFSVolumeSource{Server: "nfs.example", Path: "/export/pfs"})))))
		Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(And(HaveField("Name", "backing"), HaveField("MountPath", mountAt))))
	})

	It("reach a backing file system on a claim of their namespace at its mount path", func() {
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			fs := &p.Spec.BackingFilesystems[0]
			fs.HostPath, fs.PVC = nil, &cachev1alpha1.PVCSource{ClaimName: "pfs", Namespace: fs.AccessRules[0].Namespaces[0]}
		})
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func() []corev1.Pod { return serverPods(inst) }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(1))
		pod := serverPods(inst)[0]
		Expect(pod.Spec.Volumes).To(ContainElement(And(HaveField("Name", "backing"),
			HaveField("VolumeSource.PersistentVolumeClaim", Equal(&corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pfs"})))))
		Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(And(HaveField("Name", "backing"), HaveField("MountPath", mountAt))))
	})

	It("are refused by a pool whose claim another namespace's rule grants", func() {
		w := newWorld()
		updatePool(w, func(p *cachev1alpha1.CachePool) {
			fs := &p.Spec.BackingFilesystems[0]
			fs.HostPath, fs.PVC = nil, &cachev1alpha1.PVCSource{ClaimName: "pfs", Namespace: "storage"}
		})
		Eventually(func(g Gomega) {
			var cur cachev1alpha1.CachePool
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), &cur)).To(Succeed())
			c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonMediaUnavailable))
			g.Expect(c.Message).To(ContainSubstring("claim storage/pfs cannot be mounted by servers in namespace " + w.ns))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	})

	It("pull their image as the manager was told, the manager's image included", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func() []corev1.Pod { return serverPods(inst) }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(1))
		pod := serverPods(inst)[0]
		// The image's tag is latest, for which Kubernetes would default the
		// policy to Always: an image loaded onto the nodes without a
		// registry could not start a server.
		Expect(pod.Spec.Containers[0].Image).To(HaveSuffix(":latest"))
		Expect(pod.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: suitePullSecret}}))
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent), "container %s", c.Name)
		}
	})

	It("that run otherwise than the manager makes them now are reported until they are made anew", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		outdated := func(g Gomega) *metav1.Condition {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionServersOutdated)
			g.Expect(c).NotTo(BeNil())
			return c
		}
		Eventually(outdated, 20*time.Second, 200*time.Millisecond).Should(HaveField("Status", metav1.ConditionFalse))

		By("a pod whose image is not the manager's, as after an upgrade of the manager")
		pod := serverPods(inst)[0]
		pod.Spec.Containers[0].Image = "burstcache:0.1"
		Expect(k8sClient.Update(ctx, &pod)).To(Succeed())
		Eventually(outdated, 20*time.Second, 200*time.Millisecond).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonPodsOutdated),
			HaveField("Message", And(ContainSubstring(pod.Name), ContainSubstring("server image burstcache:0.1, now "),
				ContainSubstring("delete one at a time")))))

		By("the pod made anew once deleted")
		Expect(k8sClient.Delete(ctx, &pod)).To(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(inst.Namespace), client.MatchingLabels{
				cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
			})).To(Succeed())
			g.Expect(pods.Items).To(ConsistOf(And(HaveField("UID", Not(Equal(pod.UID))),
				HaveField("Spec.Containers", ContainElement(HaveField("Image", Not(Equal("burstcache:0.1"))))))))
			g.Expect(outdated(g).Status).To(Equal(metav1.ConditionFalse))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
