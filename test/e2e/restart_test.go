//go:build e2e

package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("A restart of the CSI node plugin", func() {
	It("goes unnoticed by a pod reading and writing through its mount", func() {
		w := newWorld("restart")
		job := cacheJob(w, "churn", cacheAnnotations(w.mkdirPFS("churn")), "churn", "/cache", "60")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) corev1.PodPhase {
			pods := jobPods(job)
			g.Expect(pods).To(HaveLen(1))
			return pods[0].Status.Phase
		}).WithTimeout(3*time.Minute).WithPolling(time.Second).Should(Equal(corev1.PodRunning), "events: %s", eventsOf(w.ns))

		By("deleting the node plugin's pod while the job churns files")
		time.Sleep(5 * time.Second)
		plugins := &corev1.PodList{}
		sel := client.MatchingLabels{"app.kubernetes.io/component": "csi-node"}
		Expect(k8sClient.List(ctx, plugins, client.InNamespace(namespace), sel)).To(Succeed())
		Expect(plugins.Items).To(HaveLen(1))
		old := plugins.Items[0].Name
		Expect(k8sClient.Delete(ctx, &plugins.Items[0])).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.List(ctx, plugins, client.InNamespace(namespace), sel)).To(Succeed())
			g.Expect(plugins.Items).To(HaveLen(1))
			g.Expect(plugins.Items[0].Name).NotTo(Equal(old))
			g.Expect(plugins.Items[0].Status.ContainerStatuses).NotTo(BeEmpty())
			g.Expect(plugins.Items[0].Status.ContainerStatuses[0].Ready).To(BeTrue())
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

		By("the job completing without a single error")
		expectJobSucceeded(job)
		Expect(jobLogs(job)).To(ContainSubstring("without an error"))
	})
})
