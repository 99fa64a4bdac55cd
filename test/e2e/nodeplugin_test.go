//go:build e2e

package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("The CSI node plugin's credentials", func() {
	It("reach only mount Leases and mount pods of the plugin's own node", func() {
		w := newWorld("plugin")
		plugins := &corev1.PodList{}
		Expect(k8sClient.List(ctx, plugins, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "csi-node"})).To(Succeed())
		Expect(plugins.Items).To(HaveLen(1))
		plugin := plugins.Items[0]
		node := plugin.Spec.NodeName

		By("taking a token as kubelet does for the plugin's pod, which names its node")
		token := func(bound bool) *kubernetes.Clientset {
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
			if bound {
				req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: plugin.Name, UID: plugin.UID}
			}
			got, err := clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, plugin.Spec.ServiceAccountName, req, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			cfg, err := ctrl.GetConfig()
			Expect(err).NotTo(HaveOccurred())
			cfg = rest.AnonymousClientConfig(cfg)
			cfg.BearerToken = got.Status.Token
			cs, err := kubernetes.NewForConfig(cfg)
			Expect(err).NotTo(HaveOccurred())
			return cs
		}
		cs := token(true)
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]).To(ConsistOf(node))

		lease := func(name, holder string) *coordinationv1.Lease {
			return &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
			}
		}
		dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		leases := cs.CoordinationV1().Leases(w.ns)

		By("letting it write a mount Lease its node holds")
		_, err = leases.Create(ctx, lease("e2e.mount."+node, node), dryRun)
		Expect(err).NotTo(HaveOccurred())

		By("refusing it another node's mount Lease, a Lease that is no mount Lease, and a pod on another node")
		_, err = leases.Create(ctx, lease("e2e.mount.elsewhere", "elsewhere"), dryRun)
		Expect(err).To(MatchError(ContainSubstring("mount Leases its node holds")))
		_, err = leases.Create(ctx, lease("kube-scheduler", node), dryRun)
		Expect(err).To(MatchError(ContainSubstring("may only write mount Leases")))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: namespace},
			Spec:       corev1.PodSpec{NodeName: "elsewhere", Containers: []corev1.Container{{Name: "c", Image: "burstcache"}}},
		}
		_, err = cs.CoreV1().Pods(namespace).Create(ctx, pod, dryRun)
		Expect(err).To(MatchError(ContainSubstring("mount pods pinned to its node")))

		By("refusing a token of its ServiceAccount that names no node")
		_, err = token(false).CoordinationV1().Leases(w.ns).Create(ctx, lease("e2e.mount."+node, node), dryRun)
		Expect(err).To(MatchError(ContainSubstring("names no node")))
	})
})
