//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

var _ = Describe("Access to the PFS", func() {
	It("refuses, with the reason, a path the namespace may not cache and an identity the pool does not map to it", func() {
		w := newWorld("deny")
		other := w.instance("elsewhere", filepath.Join(pfsRoot, "e2e"))
		err := k8sClient.Create(ctx, other)
		Expect(err).To(MatchError(ContainSubstring("denied the request")))
		Expect(err.Error()).To(ContainSubstring(filepath.Join(pfsRoot, "e2e")), "the refusal does not name the path")

		root := w.instance("as-root", w.mkdirPFS("mine"))
		root.Spec.RunAs = cachev1alpha1.RunAs{UID: 0, GID: 0}
		err = k8sClient.Create(ctx, root)
		Expect(err).To(MatchError(ContainSubstring("denied the request")))
		GinkgoWriter.Printf("refusals: %v\n", err)
	})

	It("never becomes Ready on a path its runAs cannot read, and says why", func() {
		w := newWorld("unreadable")
		dir := w.mkdirPFS("locked")
		Expect(os.Chown(dir, 0, 0)).To(Succeed())
		Expect(os.Chmod(dir, 0o700)).To(Succeed())
		inst := w.instance("locked", dir)
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
			g.Expect(inst.Status.Phase).NotTo(Equal(cachev1alpha1.PhaseReady))
			c := meta.FindStatusCondition(inst.Status.Conditions, cachev1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			return c.Message
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(And(
			ContainSubstring("cannot be read as 1000:1000"), ContainSubstring(dir)))

		By("letting the server read the path, so that the instance can be deleted")
		Expect(os.Chown(dir, jobUID, jobGID)).To(Succeed())
		Expect(k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(w.ns),
			client.MatchingLabels{cachev1alpha1.LabelInstance: inst.Name})).To(Succeed())
		expectPhase(inst, cachev1alpha1.PhaseReady, 2*time.Minute)
	})

	It("lets a job read no PFS file its uid could not read directly", func() {
		w := newWorld("perm")
		dir := w.mkdirPFS("data")
		Expect(os.WriteFile(filepath.Join(dir, "private"), []byte("root only\n"), 0o600)).To(Succeed())
		job := cacheJob(w, "reader", cacheAnnotations(dir), "cat", "/cache/private")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		expectPermissionDenied(job, "the job read a root-only file")
	})
})

var _ = Describe("A shared instance acting as the caller", func() {
	It("lets a job read what its supplementary group may read on the PFS, and nothing more", func() {
		const group = 5000
		w := newWorld("groups", func(pool *cachev1alpha1.CachePool) {
			rule := &pool.Spec.BackingFilesystems[0].AccessRules[0]
			rule.AllowRoot = true
			rule.UIDRanges = []cachev1alpha1.IDRange{{Min: 0, Max: jobUID}}
			rule.GIDRanges = []cachev1alpha1.IDRange{{Min: 0, Max: group}}
		})

		dir := w.mkdirPFS("shared")
		private := filepath.Join(dir, "project")
		Expect(os.Mkdir(private, 0o750)).To(Succeed())
		Expect(os.Chown(private, 0, group)).To(Succeed())
		Expect(os.Chmod(private, 0o750)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(private, "data"), []byte("for the project\n"), 0o640)).To(Succeed())
		Expect(os.Chown(filepath.Join(private, "data"), 0, group)).To(Succeed())
		annotations := cacheAnnotations(dir, "runAsUID", "0", "runAsGID", "0")

		By("reading as a member of the group: the servers act with the job's groups")
		member := cacheJob(w, "member", annotations, "cat", "/cache/project/data")
		member.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{SupplementalGroups: []int64{group}}
		Expect(k8sClient.Create(ctx, member)).To(Succeed())
		expectJobSucceeded(member)
		Expect(jobLogs(member)).To(ContainSubstring("for the project"))

		By("reading without it: refused, as on the PFS itself")
		outsider := cacheJob(w, "outsider", annotations, "cat", "/cache/project/data")
		Expect(k8sClient.Create(ctx, outsider)).To(Succeed())
		expectPermissionDenied(outsider, "a job outside the group read the file")

		By("refusing a client that holds the instance's Secret, which users of the namespace may read, but not the node plugins' mount key")
		list := &cachev1alpha1.CacheInstanceList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(w.ns))).To(Succeed())
		Expect(list.Items).NotTo(BeEmpty())
		inst := list.Items[0]
		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: cachev1alpha1.DataSecretName(inst.Name)}, sec)).To(Succeed())
		Expect(inst.Status.Servers).NotTo(BeEmpty())
		c := wire.NewClient(inst.Status.Servers[0].Endpoint, wire.ClientOptions{Secret: sec.Data[cachev1alpha1.DataSecretKey], Conns: 1})
		defer c.Close()
		_, err := c.Do(ctx, &wire.Call{Op: wire.OpStatFS, Cred: ident.Cred{UID: 0, GID: 0}})
		Expect(err).To(MatchError(wire.ErrMountKeyRefused))
	})
})

// expectPermissionDenied waits until job failed, refused with EACCES;
// succeeded says what it means if it succeeds instead.
func expectPermissionDenied(job *batchv1.Job, succeeded string) {
	GinkgoHelper()
	Eventually(func(g Gomega) int32 {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.Status.Succeeded).To(BeZero(), "%s: %s", succeeded, jobLogs(job))
		return job.Status.Failed
	}).WithTimeout(4*time.Minute).WithPolling(2*time.Second).Should(BeEquivalentTo(1), "events: %s", eventsOf(job.Namespace))
	Expect(jobLogs(job)).To(ContainSubstring("permission denied"))
}
