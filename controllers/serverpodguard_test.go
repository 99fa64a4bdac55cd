package controllers_test

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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Cache server pods", func() {
	It("are kept from users who may edit pods: no exec, no ephemeral containers, no changes, no impostors", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func() []corev1.Pod { return serverPods(inst) }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(1))
		server := serverPods(inst)[0]

		userCfg, userClient := podEditor(w.ns, "pod-editor")
		adminCfg, _ := podEditor(w.ns, "pod-admin", "system:masters")

		By("refusing an exec into a server pod, but not into a pod of the user's own")
		own := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: w.ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		Expect(userClient.Create(ctx, own)).To(Succeed())
		Expect(execIn(userCfg, w.ns, server.Name)).To(MatchError(And(ContainSubstring("denied"), ContainSubstring("holds the backing file system"))))
		Expect(execIn(userCfg, w.ns, own.Name)).NotTo(MatchError(ContainSubstring("holds the backing file system")))
		Expect(execIn(adminCfg, w.ns, server.Name)).NotTo(MatchError(ContainSubstring("holds the backing file system")))

		By("refusing an ephemeral container in a server pod")
		debug := server.DeepCopy()
		debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
		Expect(userClient.SubResource("ephemeralcontainers").Update(ctx, debug)).To(MatchError(ContainSubstring("takes no ephemeral containers")))

		By("refusing a change of a server pod's image or of the labels burstcache goes by")
		changed := server.DeepCopy()
		changed.Spec.Containers[0].Image = "attacker/server:latest"
		Expect(userClient.Update(ctx, changed)).To(MatchError(ContainSubstring("is the burstcache manager's to change")))
		relabelled := server.DeepCopy()
		delete(relabelled.Labels, cachev1alpha1.LabelInstance)
		Expect(userClient.Update(ctx, relabelled)).To(MatchError(ContainSubstring("are the burstcache manager's to change")))

		By("letting the user annotate a server pod, which changes nothing burstcache goes by")
		annotated := server.DeepCopy()
		if annotated.Annotations == nil {
			annotated.Annotations = map[string]string{}
		}
		annotated.Annotations["team.example/owner"] = "climate"
		Expect(userClient.Update(ctx, annotated)).To(Succeed())

		By("refusing a pod of the user's that calls itself a server of the instance")
		impostor := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: w.ns, Labels: server.Labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		Expect(userClient.Create(ctx, impostor)).To(MatchError(ContainSubstring("only the burstcache manager makes pods labelled")))
		labelled := own.DeepCopy()
		Expect(userClient.Get(ctx, client.ObjectKeyFromObject(own), labelled)).To(Succeed())
		labelled.Labels = server.Labels
		Expect(userClient.Update(ctx, labelled)).To(MatchError(ContainSubstring("are the burstcache manager's to change")))
	})
})

// podEditor makes a user who may create, change and exec into pods in ns,
// and returns its configuration and a client.
func podEditor(ns, name string, groups ...string) (*rest.Config, client.Client) {
	GinkgoHelper()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"pods", "pods/exec", "pods/attach", "pods/portforward", "pods/ephemeralcontainers"},
			Verbs:     []string{"get", "list", "create", "update", "patch", "delete"},
		}},
	}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	})).To(Succeed())
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, cfg)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(u.Config(), client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return u.Config(), c
}

// execIn asks the API server to run a command in pod, as a user of cfg. No
// kubelet answers here: a request that admission lets through fails at the
// connection to the node instead.
func execIn(cfg *rest.Config, ns, pod string) error {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "server", Command: []string{"true"}, Stdout: true}, clientgoscheme.ParameterCodec).
		Do(ctx).Error()
}
