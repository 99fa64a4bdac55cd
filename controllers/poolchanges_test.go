package controllers_test

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
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

	It("refuses to move a pool's media or backing file system, change its extent size or delete it while instances use it", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) []cachev1alpha1.ServerStatus {
			return get(inst)(g).Status.Servers
		}, 20*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())

		// edit changes the pool, again if the pool's status moved on in
		// between, and returns what the API server said.
		edit := func(change func(*cachev1alpha1.CachePool)) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				pool := &cachev1alpha1.CachePool{}
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), pool)).To(Succeed())
				change(pool)
				return k8sClient.Update(ctx, pool)
			})
		}
		moveMedia := func(p *cachev1alpha1.CachePool) {
			p.Spec.Media.HostPath.Path = cachev1alpha1.AbsolutePath(filepath.Join(kl.Root, "nvme-moved"))
		}
		refused := And(ContainSubstring("cannot change while instances of the pool hold servers"), ContainSubstring(inst.Name))
		Expect(edit(moveMedia)).To(MatchError(And(refused, ContainSubstring("spec.media.hostPath"))))
		Expect(edit(func(p *cachev1alpha1.CachePool) {
			p.Spec.Media.HostPath, p.Spec.Media.StorageClass = nil, &cachev1alpha1.StorageClassMedia{Name: "local-nvme"}
		})).To(MatchError(And(refused, ContainSubstring("spec.media.storageClass"))))
		Expect(edit(func(p *cachev1alpha1.CachePool) { p.Spec.ExtentSize = ptr(resource.MustParse("4Mi")) })).
			To(MatchError(And(refused, ContainSubstring("spec.extentSize"))))
		Expect(k8sClient.Delete(ctx, w.pool)).To(MatchError(And(ContainSubstring("CacheInstances use it"), ContainSubstring(inst.Name))))

		By("refusing to send its dirty data to another file system, or to none")
		moveBacking := func(p *cachev1alpha1.CachePool) {
			p.Spec.BackingFilesystems[0].HostPath.Path = cachev1alpha1.AbsolutePath(filepath.Join(kl.Root, "pfs-moved"))
		}
		backing := And(refused, ContainSubstring("spec.backingFilesystems[pfs]"), ContainSubstring("write their dirty data back"))
		Expect(edit(moveBacking)).To(MatchError(backing))
		Expect(edit(func(p *cachev1alpha1.CachePool) {
			fs := &p.Spec.BackingFilesystems[0]
			fs.MountPath = cachev1alpha1.AbsolutePath(filepath.Dir(string(fs.MountPath)))
		})).To(MatchError(backing))
		Expect(edit(func(p *cachev1alpha1.CachePool) { p.Spec.BackingFilesystems[0].Name = "renamed" })).To(MatchError(backing))

		By("letting other changes through")
		Expect(edit(func(p *cachev1alpha1.CachePool) { p.Spec.Media.CapacityPerNode = resource.MustParse("512Mi") })).To(Succeed())
		Expect(edit(func(p *cachev1alpha1.CachePool) {
			r := &p.Spec.BackingFilesystems[0].AccessRules[0]
			r.Namespaces = append(r.Namespaces, "another-team")
		})).To(Succeed())

		By("letting everything through once the instance is gone")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(edit(moveMedia)).To(Succeed())
		Expect(edit(moveBacking)).To(Succeed())
		Expect(k8sClient.Delete(ctx, w.pool)).To(Succeed())
	})

	It("keeps an instance Ready when its pool's capacity ceiling is lowered below it", func() {
		w := newWorld()
		inst := w.instance("128Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 2)
		Eventually(phaseOf(inst), 30*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		// A ceiling bounds what instances may ask for from now on; the
		// servers of this one hold their capacity already.
		setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) { c.Capacity = ptr(resource.MustParse("64Mi")) })
		Consistently(phaseOf(inst), 4*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		By("still accepting changes of its knobs")
		cur := get(inst)(Default)
		cur.Spec.WriteBack.Threads = ptr(int32(3))
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())

		By("refusing a new instance above the ceiling")
		Expect(k8sClient.Create(ctx, w.instance("128Mi"))).To(MatchError(ContainSubstring(cachev1alpha1.ReasonExceedsCeiling)))
	})
})
