package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Changes of the pool under running instances", func() {
	// setUnschedulable cordons or uncordons a node of the suite.
	setUnschedulable := func(name string, cordoned bool) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			node := &corev1.Node{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
			node.Spec.Unschedulable = cordoned
			g.Expect(k8sClient.Update(ctx, node)).To(Succeed())
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	}

	It("keeps an instance Ready when a node of its pool is cordoned", func() {
		// One 64Mi unit per node: an instance of the whole pool has a
		// server on each of the three nodes.
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			p.Spec.Media.CapacityPerNode = resource.MustParse("64Mi")
		})
		inst := w.instance("192Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 3)
		Eventually(phaseOf(inst), 30*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		By("cordoning a node that runs one of its servers, as before maintenance")
		setUnschedulable("node-c", true)
		DeferCleanup(setUnschedulable, "node-c", false)
		Eventually(func(g Gomega) []string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), w.pool)).To(Succeed())
			return w.pool.Status.Nodes
		}, 10*time.Second, 100*time.Millisecond).Should(HaveLen(2))

		// The servers were placed and keep running: the capacity they hold
		// is theirs, whatever the pool could place anew.
		Consistently(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, cachev1alpha1.ConditionAccepted)).To(BeTrue())
		}, 4*time.Second, 200*time.Millisecond).Should(Succeed())

		By("still accepting changes of its knobs")
		cur := get(inst)(Default)
		cur.Spec.WriteBack.Threads = ptr(int32(3))
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())

		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	})
})
