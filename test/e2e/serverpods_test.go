//go:build e2e

package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Cache server pods", func() {
	It("keep out a user who may exec into and change the namespace's pods, as the manager's service account made them", func() {
		w := newWorld("guard")
		inst := w.instance("guarded", w.mkdirPFS("data"))
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		expectPhase(inst, cachev1alpha1.PhaseReady, 2*time.Minute)
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{
			cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
		})).To(Succeed())
		Expect(pods.Items).NotTo(BeEmpty())
		server := pods.Items[0]

		const user = "e2e-pod-editor"
		Expect(k8sClient.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: w.ns},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"pods", "pods/exec"},
				Verbs: []string{"get", "list", "create", "update", "patch"},
			}},
		})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: w.ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})).To(Succeed())
		cfg, err := ctrl.GetConfig()
		Expect(err).NotTo(HaveOccurred())
		cfg = rest.CopyConfig(cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		By("refusing the user an exec into the server pod")
		err = cs.CoreV1().RESTClient().Post().Namespace(w.ns).Resource("pods").Name(server.Name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Command: []string{"true"}, Stdout: true}, clientgoscheme.ParameterCodec).
			Do(ctx).Error()
		Expect(err).To(MatchError(ContainSubstring("holds the backing file system")))

		By("refusing the user a change of the server pod's image")
		changed := server.DeepCopy()
		changed.Spec.Containers[0].Image = "attacker/server:latest"
		_, err = cs.CoreV1().Pods(w.ns).Update(ctx, changed, metav1.UpdateOptions{})
		Expect(err).To(MatchError(ContainSubstring("is the burstcache manager's to change")))
	})
})
