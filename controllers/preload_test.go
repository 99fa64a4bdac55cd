package controllers_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// slowBacking makes every read of the backing file system by the servers
// of w's namespace take this long, so that a preload of a few small files
// runs for seconds.
const slowBacking = "100ms"

// writeFiles writes n files of 1 MiB under dir on the backing file system,
// owned by runAs, and returns their total size.
func writeFiles(w *world, dir string, n int) int64 {
	GinkgoHelper()
	host := filepath.Join(w.hostPath(w.backing), dir)
	Expect(os.MkdirAll(host, 0o755)).To(Succeed())
	Expect(os.Chown(host, runAsUID, runAsGID)).To(Succeed())
	for i := range n {
		Expect(os.WriteFile(filepath.Join(host, fmt.Sprintf("part-%03d", i)), make([]byte, 1<<20), 0o644)).To(Succeed())
	}
	return int64(n) << 20
}

// preloadedCondition returns the instance's Preloaded condition.
func preloadedCondition(inst *cachev1alpha1.CacheInstance) func(Gomega) metav1.Condition {
	return func(g Gomega) metav1.Condition {
		c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionPreloaded)
		g.Expect(c).NotTo(BeNil())
		return *c
	}
}

// waitForPreloadProgress waits until the instance's status counts bytes
// its preload copied up.
func waitForPreloadProgress(inst *cachev1alpha1.CacheInstance) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		p := get(inst)(g).Status.Preload
		g.Expect(p).NotTo(BeNil())
		g.Expect(p.BytesDone).To(BeNumerically(">", 0))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
}

var _ = Describe("Preload", func() {
	It("shows its progress in status while it runs, without holding the reconciler, then turns Ready", func() {
		admin := kubeconfigOf("preload-admin", "system:masters")
		w := newWorld()
		kl.SetServerArgs(w.ns, "--backing-read-latency="+slowBacking)
		total := writeFiles(w, "input", 40)
		inst := w.instance("64Mi")
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing + "/input")}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)

		By("status.preload and the Preloaded condition counting the bytes copied up")
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhasePreloading))
			p := cur.Status.Preload
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.BytesTotal).To(Equal(total))
			g.Expect(p.BytesDone).To(And(BeNumerically(">", 0), BeNumerically("<", total)))
			c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionPreloaded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonPreloading))
			g.Expect(c.Message).To(MatchRegexp(`^copied up [0-9.]+ MiB of 40 MiB \([0-9]+%\)$`))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonPreloadStarted))

		By("a user hint being served while the preload runs")
		r := kubectlBurstcache(admin, w.ns, "flush", inst.Name, "--poll-interval=200ms", "--timeout=30s")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(ContainSubstring("flush -: Succeeded"))
		Expect(preloadedCondition(inst)(Default).Reason).To(Equal(cachev1alpha1.ReasonPreloading),
			"the preload ended before the hint did: the test shows nothing")

		By("Preloaded and Ready at the end, with every byte copied up")
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, cachev1alpha1.ConditionPreloaded)).To(BeTrue())
			g.Expect(cur.Status.Preload).To(BeNil())
			g.Expect(cur.Status.Usage.CopyUpBytes).To(BeNumerically(">=", total))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(preloadedCondition(inst)(Default).Message).To(Equal("copied up 40 MiB, all of spec.preload (1 path)"))
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonPreloadSucceeded))

		By("kubectl burstcache preload printing a progress line while it waits")
		more := writeFiles(w, "more", 30)
		r = kubectlBurstcache(admin, w.ns, "preload", inst.Name, "more", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(MatchRegexp(`(?m)^preload more: Running, copied up \S+ of 30Mi \(\d+%\)$`))
		Expect(r.out).To(ContainSubstring("preload more: Succeeded, copied up 30Mi of 30Mi (100%)"))
		Expect(get(inst)(Default).Status.LastRequest.BytesDone).To(Equal(more))
	})

	It("fails with the reason when a preload path is missing, and retries until it appears", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing + "/later")}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(func(g Gomega) metav1.Condition { return preloadedCondition(inst)(g) }, 20*time.Second, 200*time.Millisecond).
			Should(And(HaveField("Reason", cachev1alpha1.ReasonPreloadFailed), HaveField("Message", ContainSubstring("no such file"))))
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonPreloadFailed))

		writeFiles(w, "later", 2)
		Eventually(phaseOf(inst), 60*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
	})

	It("copies up what spec.preload gained while the preload ran before it turns Ready", func() {
		w := newWorld()
		kl.SetServerArgs(w.ns, "--backing-read-latency="+slowBacking)
		first := writeFiles(w, "input", 20)
		second := writeFiles(w, "extra", 5)
		inst := w.instance("64Mi")
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing + "/input")}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		waitForPreloadProgress(inst)

		By("adding a path while the preload of the first runs")
		cur := get(inst)(Default)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Preload = append(cur.Spec.Preload, cachev1alpha1.AbsolutePath(w.backing+"/extra"))
		Expect(k8sClient.Patch(ctx, cur, patch)).To(Succeed())
		Expect(preloadedCondition(inst)(Default).Reason).To(Equal(cachev1alpha1.ReasonPreloading),
			"the preload ended before the change: the test shows nothing")

		Eventually(phaseOf(inst), 60*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		Eventually(func(g Gomega) int64 { return get(inst)(g).Status.Usage.CopyUpBytes }, 10*time.Second, 200*time.Millisecond).
			Should(BeNumerically(">=", first+second), "Ready before every path of spec.preload was copied up")
	})

	It("turns Ready without status.preload when spec.preload is emptied while the preload runs", func() {
		w := newWorld()
		kl.SetServerArgs(w.ns, "--backing-read-latency="+slowBacking)
		writeFiles(w, "input", 20)
		inst := w.instance("64Mi")
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing + "/input")}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(func(g Gomega) *cachev1alpha1.PreloadStatus { return get(inst)(g).Status.Preload },
			20*time.Second, 100*time.Millisecond).ShouldNot(BeNil())

		cur := get(inst)(Default)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Preload = nil
		Expect(k8sClient.Patch(ctx, cur, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
			g.Expect(cur.Status.Preload).To(BeNil(), "status.preload is set only while the preload runs")
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("stops copying up what spec.preload no longer asks for", func() {
		w := newWorld()
		// Slower than the other specs': the preload would run for 15 s.
		kl.SetServerArgs(w.ns, "--backing-read-latency=300ms")
		total := writeFiles(w, "input", 50)
		inst := w.instance("64Mi")
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing + "/input")}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		waitForPreloadProgress(inst)

		cur := get(inst)(Default)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Preload = nil
		Expect(k8sClient.Patch(ctx, cur, patch)).To(Succeed())
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		By("the server copying up nothing more of the paths no longer asked for")
		copied := func(g Gomega) int64 { return get(inst)(g).Status.Usage.CopyUpBytes }
		// Usage comes every second; the copy-up that was under way when
		// the preload was cancelled may still land in the first.
		time.Sleep(2 * time.Second)
		before := copied(Default)
		Expect(before).To(BeNumerically("<", total/2), "the preload ran far before it was cancelled: the test shows nothing")
		Consistently(copied, 4*time.Second, 500*time.Millisecond).Should(Equal(before))
	})

	It("refuses a change of spec.preload once the preload is done, which would not run it", func() {
		w := newWorld()
		writeFiles(w, "input", 1)
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		cur := get(inst)(Default)
		cur.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing + "/input")}
		Expect(k8sClient.Update(ctx, cur)).To(MatchError(And(ContainSubstring("spec.preload"), ContainSubstring("kubectl burstcache preload"))))

		By("still accepting other changes")
		cur = get(inst)(Default)
		cur.Spec.WriteBack.Threads = ptr(int32(3))
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())
	})
})
