//go:build e2e

package e2e

import (
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The local cluster exempts the manager of the chart's default install from
// Pod Security, as the admin guide tells admins to (hack/local-cluster).
var _ = Describe("A namespace that enforces Pod Security baseline", func() {
	It("refuses pods with host paths, yet runs a job through a cache whose servers the exempt manager made", func() {
		w := newWorld("psa")
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: w.ns}, ns)).To(Succeed())
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())

		By("a pod with a host path that the suite makes being refused")
		Eventually(func() error {
			return k8sClient.Create(ctx, hostPathPod(w.ns), client.DryRunAll)
		}).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("violates PodSecurity")))

		By("a job writing through a cache in the namespace completing")
		const count, size = 2, 1<<20 + 7
		backing := w.mkdirPFS("run")
		job := cacheJob(w, "writer", cacheAnnotations(backing), "write", "/cache", strconv.Itoa(count), strconv.Itoa(size))
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		expectJobSucceeded(job)

		By("the job's deletion writing everything back to the PFS")
		Expect(k8sClient.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(w.instances).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(BeEmpty())
		expectPattern(backing, count, size)
	})
})

// hostPathPod is a pod that mounts pfsRoot from the host, as cache servers
// do, which Pod Security baseline forbids.
func hostPathPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "host-path"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: workloadImage, Command: []string{"/workload"},
				VolumeMounts: []corev1.VolumeMount{{Name: "pfs", MountPath: "/pfs"}},
			}},
			Volumes: []corev1.Volume{{Name: "pfs", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: pfsRoot},
			}}},
		},
	}
}
