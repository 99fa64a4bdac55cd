package controllers_test

import (
	"math"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("CachePool", func() {
	readyReason := func(pool *cachev1alpha1.CachePool) func(Gomega) string {
		return func(g Gomega) string {
			cur := &cachev1alpha1.CachePool{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pool), cur)).To(Succeed())
			c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionPoolReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).NotTo(Equal("True"), "pool reported Ready: %s", c.Message)
			return c.Reason
		}
	}

	It("says why a pool cannot serve: no nodes, or media it cannot use", func() {
		w := newWorld()
		By("selecting no node")
		updatePool(w, func(p *cachev1alpha1.CachePool) { p.Spec.Nodes.NodeSelector["rack"] = "nowhere" })
		Eventually(readyReason(w.pool), 10*time.Second, 100*time.Millisecond).Should(Equal(cachev1alpha1.ReasonNoNodes))
		Eventually(func(g Gomega) int64 {
			cur := &cachev1alpha1.CachePool{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), cur)).To(Succeed())
			g.Expect(cur.Status.Nodes).To(BeEmpty())
			return cur.Status.TotalCapacity.Value()
		}, 10*time.Second, 100*time.Millisecond).Should(BeZero())

		By("asking for units larger than a node holds")
		updatePool(w, func(p *cachev1alpha1.CachePool) {
			delete(p.Spec.Nodes.NodeSelector, "rack")
			p.Spec.AllocationGranularity = resource.MustParse("1Gi")
		})
		Eventually(readyReason(w.pool), 10*time.Second, 100*time.Millisecond).Should(Equal(cachev1alpha1.ReasonMediaUnavailable))

		By("naming a StorageClass that does not exist")
		updatePool(w, func(p *cachev1alpha1.CachePool) {
			p.Spec.AllocationGranularity = resource.MustParse("64Mi")
			p.Spec.Media.HostPath = nil
			p.Spec.Media.StorageClass = &cachev1alpha1.StorageClassMedia{Name: "local-nvme"}
		})
		Eventually(readyReason(w.pool), 10*time.Second, 100*time.Millisecond).Should(Equal(cachev1alpha1.ReasonMediaUnavailable))
	})

	DescribeTable("refuses an extent size its servers cannot start with",
		func(extent string) {
			w := newWorld()
			// A merge patch carries no resourceVersion, so the controller's
			// status writes cannot make it conflict.
			cur := w.pool.DeepCopy()
			cur.Spec.ExtentSize = ptr(resource.MustParse(extent))
			Expect(k8sClient.Patch(ctx, cur, client.MergeFrom(w.pool))).To(MatchError(ContainSubstring("spec.extentSize")),
				"the pool took extentSize %s, with which its servers refuse to start", extent)
		},
		Entry("1Ki, below the 4Ki the servers start with", "1Ki"),
		Entry("the allocation granularity, one extent per server", "64Mi"),
	)

	It("counts a total capacity past int64 bytes as the most it can count, not wrapped around", func() {
		w := newWorld(func(p *cachev1alpha1.CachePool) { p.Spec.Media.CapacityPerNode = resource.MustParse("4Ei") })
		most := resource.NewQuantity(math.MaxInt64, resource.BinarySI)
		Expect(w.pool.Status.TotalCapacity.Cmp(*most)).To(BeZero(), "3 nodes of 4Ei show a total of %s", w.pool.Status.TotalCapacity)
		Expect(w.pool.Status.FreeCapacity.Cmp(*most)).To(BeZero(), "3 empty nodes of 4Ei show %s free", w.pool.Status.FreeCapacity)
		Expect(k8sClient.Create(ctx, w.instance("64Mi"))).To(Succeed(), "an instance fits in the free capacity")
	})
})
