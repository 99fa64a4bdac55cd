package controllers_test

import (
	"bytes"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

var _ = Describe("Mount accounting", func() {
	It("counts mount Leases as mounts, and holds the teardown write-back until the last Lease is gone", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		data := bytes.Repeat([]byte("lease-held"), 100<<10)
		writeThroughMount(inst, addrs, "leased/out.dat", data)

		published := createMountLease(inst, "node-a", "job-0/cache,job-1/cache")
		staged := createMountLease(inst, "node-b", "")
		Eventually(func(g Gomega) []cachev1alpha1.Mount {
			return get(inst)(g).Status.ActiveMounts
		}, 10*time.Second, 200*time.Millisecond).Should(ConsistOf(
			cachev1alpha1.Mount{Node: "node-a", Pod: "job-0", Volume: "cache"},
			cachev1alpha1.Mount{Node: "node-a", Pod: "job-1", Volume: "cache"},
			cachev1alpha1.Mount{Node: "node-b"},
		))

		By("holding the finalizer and the dirty data while a Lease is left")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Expect(k8sClient.Delete(ctx, published)).To(Succeed())
		// A pass that had not seen the deletion yet may count the Leases
		// before the teardown says it waits for them: wait for both.
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.ActiveMounts).To(ConsistOf(cachev1alpha1.Mount{Node: "node-b"}))
			c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionFlushed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonWaitingForUnmount))
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Finalizers).To(ContainElement(cachev1alpha1.Finalizer))
			c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionFlushed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonWaitingForUnmount))
			g.Expect(c.Message).To(ContainSubstring("node node-b"))
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
		out := filepath.Join(w.hostPath(w.backing), "leased", "out.dat")
		Expect(os.ReadFile(out)).NotTo(Equal(data), "written back while a node had the instance staged")

		By("writing back and letting go once the staged node released it")
		Expect(k8sClient.Delete(ctx, staged)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(out)).To(Equal(data))
	})

	It("names a mount on a node that is gone, and says how to let the teardown go on", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
		lost := createMountLease(inst, "node-gone", "job-0/cache")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionFlushed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonWaitingForUnmount))
			return c.Message
		}, 10*time.Second, 200*time.Millisecond).Should(And(
			ContainSubstring("pod job-0 on node node-gone, whose node is not Ready"),
			ContainSubstring("kubectl delete lease -n "+inst.Namespace+" "+lost.Name)))

		By("going on once the Lease of the lost node is deleted")
		Expect(k8sClient.Delete(ctx, lost)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
	})
})

// createMountLease creates the Lease a CSI node plugin holds while node has
// inst staged, publishing it to pods ("pod/volume,...").
func createMountLease(inst *cachev1alpha1.CacheInstance, node, pods string) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: volume.MountLeaseName(inst.Name, node), Namespace: inst.Namespace, Labels: map[string]string{
			cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentMount,
		}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr(node)},
	}
	if pods != "" {
		l.Annotations = map[string]string{cachev1alpha1.AnnotationMountPods: pods}
	}
	Expect(k8sClient.Create(ctx, l)).To(Succeed())
	return l
}
