//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/test/e2e/pattern"
)

var _ = Describe("A cache with preload", func() {
	It("holds its job back until preload ends, and the job then reads everything from the cache", func() {
		const count, size = 4, 4 << 20
		w := newWorld("preload")
		dir := w.mkdirPFS("dataset")
		input := filepath.Join(dir, "input")
		Expect(os.Mkdir(input, 0o755)).To(Succeed())
		for i := range count {
			p := filepath.Join(input, pattern.Name(i))
			Expect(os.WriteFile(p, pattern.Bytes(pattern.Name(i), size), 0o644)).To(Succeed())
			Expect(os.Chown(p, jobUID, jobGID)).To(Succeed())
		}
		inst := w.instance("dataset", dir)
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(input)}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		job := cacheJob(w, "reader", map[string]string{"csi.burstcache.io/instance": inst.Name},
			"verify", "/cache/input", strconv.Itoa(count), strconv.Itoa(size))
		job.Spec.Template.Labels = map[string]string{cachev1alpha1.LabelInstance: inst.Name}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		By("the job's pod being created gated, and scheduled only after the instance was Preloaded")
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			pods := jobPods(job)
			g.Expect(pods).To(HaveLen(1))
			pod = pods[0]
		}).WithTimeout(time.Minute).Should(Succeed())
		expectJobSucceeded(job)
		Expect(jobLogs(job)).To(ContainSubstring("verified 4 files"))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
		expectPhase(inst, cachev1alpha1.PhaseReady, time.Minute)
		preloaded := meta.FindStatusCondition(inst.Status.Conditions, cachev1alpha1.ConditionPreloaded)
		Expect(preloaded).NotTo(BeNil())
		Expect(preloaded.Status).To(Equal(metav1.ConditionTrue))
		scheduled := podCondition(&pod, corev1.PodScheduled)
		Expect(scheduled).NotTo(BeNil())
		Expect(scheduled.LastTransitionTime.Time).NotTo(BeTemporally("<", preloaded.LastTransitionTime.Time),
			"the pod was scheduled before preload ended")

		By("the job's reads all being hits: every byte was copied up once, by the preload")
		u := settledUsage(inst)
		extents := int64(count * size >> 20)
		Expect(u.CopyUpBytes).To(BeEquivalentTo(count*size), "usage: %+v", u)
		Expect(u.Misses).To(BeNumerically("<=", extents), "the preload's copy-ups are the only misses: %+v", u)
		Expect(u.Hits).To(BeNumerically(">=", extents))
	})
})

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
