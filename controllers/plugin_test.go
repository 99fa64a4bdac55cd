package controllers_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cmd/kubectl-burstcache/plugin"
)

// The plugin runs in the test's process, against the suite's API server,
// with a kubeconfig of its own as a user would have.

// pluginRun is the outcome of one plugin command.
type pluginRun struct {
	out, err string
	code     int
}

// kubectlBurstcache runs the plugin with the kubeconfig in the namespace.
func kubectlBurstcache(kubeconfig, ns string, args ...string) pluginRun {
	var out, errOut bytes.Buffer
	args = append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)
	code := plugin.Main(args, &out, &errOut)
	GinkgoWriter.Printf("kubectl burstcache %s -> %d\n%s%s", strings.Join(args[4:], " "), code, out.String(), errOut.String())
	return pluginRun{out: out.String(), err: errOut.String(), code: code}
}

// kubeconfigOf writes a kubeconfig for a user of the suite's API server.
func kubeconfigOf(name string, groups ...string) string {
	GinkgoHelper()
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	b, err := u.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	p := filepath.Join(GinkgoT().TempDir(), name+".kubeconfig")
	Expect(os.WriteFile(p, b, 0o600)).To(Succeed())
	return p
}

// applyUserRoles creates the ClusterRoles of config/rbac/user_roles.yaml.
// envtest runs no controller manager to aggregate them into edit and view,
// so the tests bind them directly.
func applyUserRoles() {
	GinkgoHelper()
	f, err := os.Open(filepath.Join(repoRoot, "config", "rbac", "user_roles.yaml"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		role := &rbacv1.ClusterRole{}
		if err := dec.Decode(role); err != nil {
			Expect(err.Error()).To(Equal("EOF"))
			return
		}
		if role.Name == "" {
			continue
		}
		if err := k8sClient.Create(ctx, role); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
}

// bindRole binds a ClusterRole to a user in a namespace.
func bindRole(ns, user, role string) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	})).To(Succeed())
}

var _ = Describe("kubectl burstcache", func() {
	var admin string
	BeforeEach(func() { admin = kubeconfigOf("plugin-admin", "system:masters") })

	It("lists pools, instances, servers and usage as tables and as JSON", func() {
		w := newWorld()
		inst, _, data := readyWithDirtyData(w, "128Mi", 2)

		r := kubectlBurstcache(admin, w.ns, "instances")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(MatchRegexp(`(?m)^NAMESPACE\s+NAME\s+PHASE\s+POOL\s+CAPACITY\s+SERVERS\s+DIRTY\s+HIT RATIO\s+BACKING$`))
		Expect(r.out).To(MatchRegexp(`(?m)^%s\s+%s\s+Ready\s+%s\s+128Mi\s+2/2\s+\S+\s+\S+\s+%s$`, w.ns, inst.Name, w.pool.Name, w.backing))

		r = kubectlBurstcache(admin, w.ns, "servers", inst.Name)
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(MatchRegexp(`(?m)^NAMESPACE\s+INSTANCE\s+SERVER\s+POD\s+NODE\s+ENDPOINT\s+CAPACITY\s+READY\s+DIRTY$`))
		Expect(r.out).To(MatchRegexp(`(?m)^%s\s+%s\s+server-0\s+\S+\s+node-\w\s+127(\.\d+){3}:7070\s+64Mi\s+true\s+[1-9]\S*$`, w.ns, inst.Name))
		Expect(r.out).To(MatchRegexp(`(?m)^%s\s+%s\s+server-1\s`, w.ns, inst.Name))

		r = kubectlBurstcache(admin, w.ns, "pools")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(MatchRegexp(`(?m)^%s\s+3\s+768Mi\s+\S+\s+64Mi\s+\d+$`, w.pool.Name))

		By("printing usage as JSON, the write window included")
		r = kubectlBurstcache(admin, w.ns, "usage", inst.Name, "-o", "json")
		Expect(r.code).To(Equal(0), r.err)
		var rows []struct {
			Instance string              `json:"instance"`
			Usage    cachev1alpha1.Usage `json:"usage"`
		}
		Expect(json.Unmarshal([]byte(r.out), &rows)).To(Succeed())
		Expect(rows).To(HaveLen(1))
		Expect(rows[0].Instance).To(Equal(inst.Name))
		Expect(rows[0].Usage.Dirty.Value()).To(BeNumerically(">=", len(data)))
		Expect(rows[0].Usage.WindowBytesWritten).To(BeNumerically(">=", len(data)))

		r = kubectlBurstcache(admin, w.ns, "instances", "-o", "yaml")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(ContainSubstring("name: " + inst.Name))
		Expect(kubectlBurstcache(admin, w.ns, "instances", "-o", "xml").code).To(Equal(1))
	})

	It("flushes with a progress line until no dirty data is left", func() {
		w := newWorld()
		inst, _, data := readyWithDirtyData(w, "128Mi", 2)
		out := filepath.Join(w.hostPath(w.backing), "results", "out.dat")
		Expect(os.ReadFile(out)).NotTo(Equal(data), "written back before the flush")

		r := kubectlBurstcache(admin, w.ns, "flush", inst.Name, "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		Expect(lines[0]).To(MatchRegexp(`^flush: request flush-\S+ sent to %s/%s$`, w.ns, inst.Name))
		Expect(lines).To(ContainElement(MatchRegexp(`^flush -: (Pending|Running), dirty [1-9]`)), "no progress was shown while data was dirty")
		Expect(lines[len(lines)-1]).To(Equal("flush -: Succeeded, dirty 0"))
		Expect(os.ReadFile(out)).To(Equal(data))
		Eventually(func(g Gomega) int64 {
			return get(inst)(g).Status.Usage.Dirty.Value()
		}, 10*time.Second, 200*time.Millisecond).Should(BeZero())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElements(cachev1alpha1.ReasonRequestRunning, cachev1alpha1.ReasonRequestSucceeded))

		By("counting the flush and the Ready instance in the manager's metrics")
		Expect(managerMetric("burstcache_manager_flush_duration_seconds", map[string]string{"namespace": w.ns, "kind": "request"})).To(BeEquivalentTo(1))
		Expect(managerMetric("burstcache_manager_instances", map[string]string{"namespace": w.ns, "phase": "Ready"})).To(BeEquivalentTo(1))
	})

	It("says it stopped waiting, and that the request goes on, at its --timeout", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		r := kubectlBurstcache(admin, w.ns, "flush", inst.Name, "--timeout=1ns")
		Expect(r.code).To(Equal(1))
		Expect(r.err).To(MatchRegexp(`stopped waiting for flush request flush-\S+ in phase Pending; it goes on`))
		Expect(get(inst)(Default).Annotations).To(HaveKey(cachev1alpha1.AnnotationRequest), "the request was not left with the instance")
	})

	It("refuses a hint on a path outside the instance", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		for _, p := range []string{"../other-project", "results/../../..", "/etc"} {
			r := kubectlBurstcache(admin, w.ns, "evict", inst.Name, p)
			Expect(r.code).To(Equal(1))
			Expect(r.err).To(And(ContainSubstring(cachev1alpha1.AnnotationRequest), MatchRegexp("leaves the instance|is absolute")))
		}
		Expect(get(inst)(Default).Annotations).NotTo(HaveKey(cachev1alpha1.AnnotationRequest))

		By("taking an absolute path under the backing path as relative to the instance")
		r := kubectlBurstcache(admin, w.ns, "preload", inst.Name, w.backing+"/in", "--wait=false")
		Expect(r.code).To(Equal(0), r.err)
		Expect(get(inst)(Default).Annotations[cachev1alpha1.AnnotationRequest]).To(ContainSubstring(`"path":"in"`))
	})

	It("lets a user who may patch the instance ask, and refuses one who may only read it", func() {
		w := newWorld()
		inst, _, _ := readyWithDirtyData(w, "64Mi", 1)
		applyUserRoles()
		viewer, editor := "viewer-"+w.ns, "editor-"+w.ns
		bindRole(w.ns, viewer, "instance-viewer")
		bindRole(w.ns, editor, "instance-editor")

		r := kubectlBurstcache(kubeconfigOf(viewer), w.ns, "instances")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(ContainSubstring(inst.Name))
		r = kubectlBurstcache(kubeconfigOf(viewer), w.ns, "flush", inst.Name)
		Expect(r.code).To(Equal(1))
		Expect(r.err).To(ContainSubstring("forbidden"))
		Expect(get(inst)(Default).Annotations).NotTo(HaveKey(cachev1alpha1.AnnotationRequest))

		By("refusing the editor in another namespace")
		other := newWorld()
		r = kubectlBurstcache(kubeconfigOf(editor), other.ns, "instances")
		Expect(r.code).To(Equal(1))
		Expect(r.err).To(ContainSubstring("forbidden"))

		r = kubectlBurstcache(kubeconfigOf(editor), w.ns, "flush", inst.Name, "results", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(ContainSubstring("flush results: Succeeded"))
	})
})
