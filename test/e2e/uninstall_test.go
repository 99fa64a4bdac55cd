//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// The uninstall spec runs alone, after the others (hack/e2e.sh selects it by
// its label), since it removes the chart they test.
var _ = Describe("helm uninstall", Label("uninstall"), func() {
	It("leaves no burstcache object, pod or mount behind once every instance is gone", func() {
		Expect(os.Getenv("E2E_HELM")).NotTo(BeEmpty(), "E2E_HELM names the helm binary; run make test-e2e")
		insts := &cachev1alpha1.CacheInstanceList{}
		Expect(k8sClient.List(ctx, insts)).To(Succeed())
		Expect(insts.Items).To(BeEmpty(), "instances are left; uninstall would strand their data")

		out, err := exec.Command(os.Getenv("E2E_HELM"), "uninstall", "burstcache", "--namespace", namespace, "--wait").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))

		Eventually(func(g Gomega) []string {
			pods := &corev1.PodList{}
			g.Expect(k8sClient.List(ctx, pods, client.InNamespace(namespace))).To(Succeed())
			left := []string{}
			for _, p := range pods.Items {
				left = append(left, p.Name)
			}
			all := &corev1.PodList{}
			g.Expect(k8sClient.List(ctx, all, client.HasLabels{cachev1alpha1.LabelComponent})).To(Succeed())
			for _, p := range all.Items {
				left = append(left, p.Namespace+"/"+p.Name)
			}
			return left
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(BeEmpty())

		notFound := MatchError(ContainSubstring("not found"))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "csi.burstcache.io"}, &storagev1.CSIDriver{})).To(notFound)
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "burstcache-mutating-webhook-configuration"},
			&admissionregistrationv1.MutatingWebhookConfiguration{})).To(notFound)
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "burstcache-validating-webhook-configuration"},
			&admissionregistrationv1.ValidatingWebhookConfiguration{})).To(notFound)
		roles := &rbacv1.ClusterRoleList{}
		Expect(k8sClient.List(ctx, roles)).To(Succeed())
		for _, r := range roles.Items {
			Expect(r.Name).NotTo(HavePrefix("burstcache-"))
		}
		pools := &cachev1alpha1.CachePoolList{}
		Expect(k8sClient.List(ctx, pools)).To(Succeed())
		Expect(pools.Items).To(BeEmpty())

		By("finding no burstcache mount below kubelet's directory on the node")
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(string(mounts), "\n") {
			Expect(line).NotTo(ContainSubstring("csi.burstcache.io"))
			if strings.Contains(line, "/var/lib/kubelet/") {
				Expect(line).NotTo(ContainSubstring("fuse.burstcache"))
			}
		}
	})
})
