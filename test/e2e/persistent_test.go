//go:build e2e

package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("A persistent CacheInstance", func() {
	const count, size = 3, 2<<20 + 777

	It("serves a second pod, from the cache, what a first pod wrote", func() {
		w := newWorld("persist")
		inst := w.instance("shared", w.mkdirPFS("shared"))
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		expectPhase(inst, cachev1alpha1.PhaseReady, 3*time.Minute)

		By("its servers refusing the evictions of a node drain")
		expectEvictionsRefused(w, inst)

		By("a first job writing through the named instance")
		named := map[string]string{"csi.burstcache.io/instance": inst.Name}
		first := cacheJob(w, "first", named, "write", "/cache", strconv.Itoa(count), strconv.Itoa(size))
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		expectJobSucceeded(first)
		Expect(jobLogs(first)).To(ContainSubstring("verified 3 files"))
		before := settledUsage(inst)

		By("a second job, started after the first, reading the same files")
		second := cacheJob(w, "second", named, "verify", "/cache", strconv.Itoa(count), strconv.Itoa(size))
		Expect(k8sClient.Create(ctx, second)).To(Succeed())
		expectJobSucceeded(second)
		Expect(jobLogs(second)).To(ContainSubstring("verified 3 files"))

		By("the instance's status counting the second job's reads as hits, with no new miss")
		extents := int64(count * ((size + 1<<20 - 1) >> 20))
		Eventually(func(g Gomega) int64 {
			return usageOf(g, inst).Hits
		}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(BeNumerically(">=", before.Hits+extents))
		after := settledUsage(inst)
		Expect(after.Misses).To(Equal(before.Misses), "the second job's reads missed the cache")
		Expect(after.HitRatio).NotTo(BeEmpty())
		GinkgoWriter.Printf("usage after the first job: %+v\nafter the second: %+v\n", before, after)

		By("deleting the instance: its teardown writes everything back")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(w.instances).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(BeEmpty())
		expectPattern(string(inst.Spec.Backing.Path), count, size)

		By("the drained servers removed their cache files from the node")
		hostDir := filepath.Join("/var/lib/burstcache-e2e/cache", inst.Namespace, inst.Name+"-"+string(inst.UID))
		Expect(filepath.Join(hostDir, "server-0")).To(BeADirectory())
		Eventually(func() ([]string, error) {
			return filepath.Glob(filepath.Join(hostDir, "server-*", "extents"))
		}).WithTimeout(time.Minute).Should(BeEmpty())
	})

	It("waits in Flushing while dirty data cannot be written back, across a manager restart, and deletes only after write-back", func() {
		w := newWorld("flush")
		dir := w.mkdirPFS("dirty")
		// A small file system of its own on the PFS path, so the test can
		// make write-back fail (ENOSPC) and then succeed.
		Expect(syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m,mode=0755,uid=1000,gid=1000")).To(Succeed())
		DeferCleanup(func() { Expect(syscall.Unmount(dir, syscall.MNT_DETACH)).To(Succeed()) })
		inst := w.instance("dirty", dir)
		inst.Spec.WriteBack = &cachev1alpha1.WriteBack{DirtyHighWatermark: ptr.To(int32(90)), DirtyLowWatermark: ptr.To(int32(80))}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		expectPhase(inst, cachev1alpha1.PhaseReady, 3*time.Minute)
		job := cacheJob(w, "writer", map[string]string{"csi.burstcache.io/instance": inst.Name},
			"write", "/cache", strconv.Itoa(count), strconv.Itoa(size))
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		expectJobSucceeded(job)

		By("filling the PFS, so that no dirty byte can be written back, and deleting the instance")
		filler := filepath.Join(dir, "filler")
		fill(filler)
		Expect(onPFS(dir)).To(BeNumerically("<", count*size), "the data was written back before the test could stop it")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		expectPhase(inst, cachev1alpha1.PhaseFlushing, time.Minute)
		Consistently(func(g Gomega) cachev1alpha1.Phase {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
			return inst.Status.Phase
		}).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Equal(cachev1alpha1.PhaseFlushing))
		GinkgoWriter.Printf("while the PFS is full: %+v\n", inst.Status.Conditions)

		By("restarting the manager mid-flush: the new one keeps waiting")
		restartManager()
		Consistently(func(g Gomega) cachev1alpha1.Phase {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
			return inst.Status.Phase
		}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Equal(cachev1alpha1.PhaseFlushing))

		By("freeing the PFS: write-back ends, then the instance goes")
		Expect(os.Remove(filler)).To(Succeed())
		Eventually(w.instances).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(BeEmpty())
		expectPattern(dir, count, size)
	})
})

// restartManager deletes the manager's pods and waits until a new one is Ready.
// expectEvictionsRefused checks that the disruption controller counts
// every server of inst under its disruption budget, and that the eviction
// of a server, as a node drain asks for it, is refused.
func expectEvictionsRefused(w *world, inst *cachev1alpha1.CacheInstance) {
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
	servers := int32(len(inst.Status.Servers))
	ofServers := client.MatchingLabels{cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer}
	Eventually(func(g Gomega) {
		pdbs := &policyv1.PodDisruptionBudgetList{}
		g.Expect(k8sClient.List(ctx, pdbs, client.InNamespace(w.ns), ofServers)).To(Succeed())
		g.Expect(pdbs.Items).To(HaveLen(1))
		st := pdbs.Items[0].Status
		g.Expect(st.ObservedGeneration).To(Equal(pdbs.Items[0].Generation))
		g.Expect(st.ExpectedPods).To(Equal(servers))
		g.Expect(st.CurrentHealthy).To(Equal(servers))
		g.Expect(st.DisruptionsAllowed).To(BeZero())
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	pods := &corev1.PodList{}
	Expect(k8sClient.List(ctx, pods, client.InNamespace(w.ns), ofServers)).To(Succeed())
	Expect(pods.Items).To(HaveLen(int(servers)))
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pods.Items[0].Name, Namespace: w.ns}}
	err := k8sClient.SubResource("eviction").Create(ctx, &pods.Items[0], eviction)
	Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "evicting server pod %s: %v", pods.Items[0].Name, err)
	Expect(eventsOf(w.ns)).NotTo(ContainSubstring("UnmanagedPods"))
}

func restartManager() {
	GinkgoHelper()
	sel := client.MatchingLabels{"app.kubernetes.io/component": "manager"}
	pods := &corev1.PodList{}
	Expect(k8sClient.List(ctx, pods, client.InNamespace(namespace), sel)).To(Succeed())
	Expect(pods.Items).NotTo(BeEmpty())
	old := map[string]bool{}
	for i := range pods.Items {
		old[pods.Items[i].Name] = true
		Expect(k8sClient.Delete(ctx, &pods.Items[i])).To(Succeed())
	}
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.List(ctx, pods, client.InNamespace(namespace), sel)).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range pods.Items {
			g.Expect(old).NotTo(HaveKey(p.Name))
			g.Expect(podCondition(&p, corev1.PodReady)).NotTo(BeNil())
			g.Expect(podCondition(&p, corev1.PodReady).Status).To(Equal(corev1.ConditionTrue))
		}
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
}

// fill writes zeros to path, as root, until the file system is full.
func fill(path string) {
	GinkgoHelper()
	f, err := os.Create(path)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			Expect(errors.Is(err, syscall.ENOSPC)).To(BeTrue(), "filling the PFS: %v", err)
			return
		}
	}
}

// onPFS returns how many bytes of workload files dir holds: the blocks
// allocated, since a file's size may be set before its data is written back.
func onPFS(dir string) int {
	GinkgoHelper()
	total := 0
	entries, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if info, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), "file-") {
			total += int(info.Sys().(*syscall.Stat_t).Blocks * 512)
		}
	}
	return total
}

// instance is a CacheInstance of w's pool caching dir as the job's identity.
func (w *world) instance(name, dir string) *cachev1alpha1.CacheInstance {
	return &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: cachev1alpha1.CacheInstanceSpec{
			Capacity: resource.MustParse("1Gi"),
			Pool:     w.pool,
			Backing:  &cachev1alpha1.BackingPath{Filesystem: "pfs", Path: cachev1alpha1.AbsolutePath(dir)},
			RunAs:    cachev1alpha1.RunAs{UID: jobUID, GID: jobGID},
		},
	}
}

func expectPhase(inst *cachev1alpha1.CacheInstance, phase cachev1alpha1.Phase, timeout time.Duration) {
	GinkgoHelper()
	Eventually(func(g Gomega) cachev1alpha1.Phase {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		return inst.Status.Phase
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Equal(phase), "conditions: %+v\nevents: %s", &inst.Status.Conditions, eventsOf(inst.Namespace))
}

func usageOf(g Gomega, inst *cachev1alpha1.CacheInstance) cachev1alpha1.Usage {
	cur := &cachev1alpha1.CacheInstance{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), cur)).To(Succeed())
	g.Expect(cur.Status.Usage).NotTo(BeNil(), "the instance reports no usage")
	return *cur.Status.Usage
}

// settledUsage returns the instance's usage once two readings 10 s apart
// agree, since status aggregates the servers' statistics periodically.
func settledUsage(inst *cachev1alpha1.CacheInstance) cachev1alpha1.Usage {
	GinkgoHelper()
	var last cachev1alpha1.Usage
	Eventually(func(g Gomega) {
		prev := last
		last = usageOf(g, inst)
		g.Expect(last.Hits).To(Equal(prev.Hits))
		g.Expect(last.Misses).To(Equal(prev.Misses))
	}).WithTimeout(2 * time.Minute).WithPolling(10 * time.Second).Should(Succeed())
	return last
}
