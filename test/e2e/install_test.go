//go:build e2e

package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("The installed chart", Ordered, func() {
	It("runs the manager Ready, with the webhook certificate it issued itself", func() {
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "burstcache-manager"}, d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(BeNumerically(">=", 1))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "burstcache-webhook-server-cert"}, sec)).To(Succeed())
		Expect(sec.Data["ca.crt"]).NotTo(BeEmpty())
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "burstcache-mutating-webhook-configuration"}, m)).To(Succeed())
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "burstcache-validating-webhook-configuration"}, v)).To(Succeed())
		for _, w := range m.Webhooks {
			Expect(w.ClientConfig.CABundle).To(Equal(sec.Data["ca.crt"]), w.Name)
		}
		for _, w := range v.Webhooks {
			Expect(w.ClientConfig.CABundle).To(Equal(sec.Data["ca.crt"]), w.Name)
		}
	})

	It("accepts a CachePool on the cluster's nodes", func() {
		pool := examplePool()
		Eventually(func() error {
			return client.IgnoreAlreadyExists(k8sClient.Create(ctx, pool))
		}).WithTimeout(time.Minute).Should(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, pool))).To(Succeed()) })
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(pool.Status.Conditions, cachev1alpha1.ConditionPoolReady)).To(BeTrue(), "conditions: %v", pool.Status.Conditions)
			g.Expect(pool.Status.Nodes).NotTo(BeEmpty())
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		By("admitting an instance the pool allows, through both webhooks over TLS")
		Expect(k8sClient.Create(ctx, exampleInstance("/srv/pfs/project"), client.DryRunAll)).To(Succeed())
		By("refusing an instance of a path the pool does not allow, with the webhook's reason")
		err := k8sClient.Create(ctx, exampleInstance("/etc"), client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("denied the request")))
	})

	It("serves the same certificate after the manager restarts", func() {
		key := client.ObjectKey{Namespace: namespace, Name: "burstcache-webhook-server-cert"}
		before := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key, before)).To(Succeed())
		pods := &corev1.PodList{}
		Expect(k8sClient.List(ctx, pods, client.InNamespace(namespace),
			client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		old := map[string]bool{}
		for i := range pods.Items {
			old[pods.Items[i].Name] = true
			Expect(k8sClient.Delete(ctx, &pods.Items[i])).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.List(ctx, pods, client.InNamespace(namespace),
				client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
			ready := 0
			for _, p := range pods.Items {
				g.Expect(old).NotTo(HaveKey(p.Name), "an old manager pod is still there")
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			g.Expect(ready).To(BeNumerically(">=", 1))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		after := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, key, after)).To(Succeed())
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the restarted manager issued a new certificate")
		Eventually(func() error {
			return client.IgnoreAlreadyExists(k8sClient.Create(ctx, examplePool()))
		}).WithTimeout(time.Minute).Should(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, examplePool()))).To(Succeed()) })
		Eventually(func() error {
			return k8sClient.Create(ctx, exampleInstance("/srv/pfs/project"), client.DryRunAll)
		}).WithTimeout(time.Minute).Should(Succeed())
	})
})

const examplePoolName = "e2e-pool"

func examplePool() *cachev1alpha1.CachePool {
	return &cachev1alpha1.CachePool{
		ObjectMeta: metav1.ObjectMeta{Name: examplePoolName},
		Spec: cachev1alpha1.CachePoolSpec{
			Media: cachev1alpha1.CacheMedia{
				HostPath:        &cachev1alpha1.HostPathSource{Path: "/var/lib/burstcache-e2e/cache"},
				CapacityPerNode: resource.MustParse("2Gi"),
			},
			AllocationGranularity: resource.MustParse("1Gi"),
			BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "pfs", MountPath: "/srv/pfs", HostPath: &cachev1alpha1.HostPathSource{Path: "/srv/pfs"},
				AccessRules: []cachev1alpha1.AccessRule{{
					Namespaces:   []string{"default"},
					PathPrefixes: []cachev1alpha1.AbsolutePath{"/srv/pfs"},
					UIDRanges:    []cachev1alpha1.IDRange{{Min: 1000, Max: 60000}},
					GIDRanges:    []cachev1alpha1.IDRange{{Min: 1000, Max: 60000}},
				}},
			}},
		},
	}
}

// exampleInstance is an instance of examplePool in the default namespace,
// caching path; the pool allows /srv/pfs and nothing else.
func exampleInstance(path string) *cachev1alpha1.CacheInstance {
	return &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e2e-admission"},
		Spec: cachev1alpha1.CacheInstanceSpec{
			Capacity: resource.MustParse("1Gi"),
			Pool:     examplePoolName,
			Backing:  &cachev1alpha1.BackingPath{Filesystem: "pfs", Path: cachev1alpha1.AbsolutePath(path)},
			RunAs:    cachev1alpha1.RunAs{UID: 1000, GID: 1000},
		},
	}
}
