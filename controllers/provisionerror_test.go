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
	"github.com/burstcache/burstcache/test/kubelet"
)

var _ = Describe("Server objects that cannot be created", func() {
	It("says in status and an event why the servers cannot be created, and lets such an instance go", func() {
		w := newWorld()
		// Servers mount the pool's media and the backing file system from
		// the host, which the baseline Pod Security level forbids.
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: w.ns}, ns)).To(Succeed())
		ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())

		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionServersReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			return c.Message
		}, 20*time.Second, 200*time.Millisecond).Should(And(ContainSubstring(inst.Name+"-server-0"), ContainSubstring("forbidden")))
		Expect(phaseOf(inst)(Default)).To(Equal(cachev1alpha1.PhaseProvisioning))
		Eventually(func() []string { return eventMessages(w.ns, inst.Name) }, 10*time.Second, 200*time.Millisecond).
			Should(ContainElement(ContainSubstring("forbidden")))

		// It was never Ready, so nothing is to be written back: its teardown
		// must not wait for a server that can never be created.
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	It("says why the teardown cannot bring back a server that went, and goes on once it can", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		By("forbidding new server pods, then losing the one that runs")
		setEnforce := func(level string) {
			ns := &corev1.Namespace{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: w.ns}, ns)).To(Succeed())
			ns.Labels["pod-security.kubernetes.io/enforce"] = level
			Expect(k8sClient.Update(ctx, ns)).To(Succeed())
		}
		setEnforce("baseline")
		pod := serverPods(inst)[0]
		kl.Stop(kubelet.PodKey(&pod))
		Expect(k8sClient.Delete(ctx, &pod)).To(Succeed())
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionFlushed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonFlushFailed))
			return c.Message
		}, 20*time.Second, 200*time.Millisecond).Should(And(ContainSubstring("bringing back a server"), ContainSubstring("forbidden")))

		By("writing back and going once the server can run again")
		setEnforce("privileged")
		kl.RunServers(ctx, inst, 1)
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	})
})
