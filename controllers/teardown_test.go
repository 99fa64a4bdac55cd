package controllers_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	bcclient "github.com/burstcache/burstcache/cacheserver/client"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/controllers/cacheinstance"
	"github.com/burstcache/burstcache/test/kubelet"
)

var _ = Describe("Teardown", func() {
	// ready creates an instance with one real server, writes data through a
	// real mount, and waits until the server reports it dirty.
	// started creates an instance with one server and waits until it is
	// Ready, returning the server's address.
	started := func(w *world, edit func(*cachev1alpha1.CacheInstance)) (*cachev1alpha1.CacheInstance, []string) {
		GinkgoHelper()
		inst := w.instance("64Mi")
		if edit != nil {
			edit(inst)
		}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		return inst, addrs
	}
	ready := func(w *world, edit func(*cachev1alpha1.CacheInstance)) (*cachev1alpha1.CacheInstance, []byte) {
		GinkgoHelper()
		inst, addrs := started(w, edit)
		data := bytes.Repeat([]byte("0123456789abcdef"), 128<<10) // 2Mi
		writeThroughMount(inst, addrs, "results/out.dat", data)
		Eventually(func(g Gomega) int64 {
			return get(inst)(g).Status.Usage.Dirty.Value()
		}, 20*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", len(data)))
		return inst, data
	}
	outFile := func(w *world) string { return filepath.Join(w.hostPath(w.backing), "results", "out.dat") }
	// breakWriteBack hands the file to another user, so that every
	// write-back as runAs fails with EACCES (a mode change alone would not
	// do: write-back reaches a read-only file for its owner); fix undoes it.
	breakWriteBack := func(w *world) {
		Expect(os.Chown(outFile(w), 2000, 2000)).To(Succeed())
	}
	fixWriteBack := func(w *world) {
		Expect(os.Chown(outFile(w), runAsUID, runAsGID)).To(Succeed())
	}
	flushedReason := func(inst *cachev1alpha1.CacheInstance) func(Gomega) string {
		return func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionFlushed)
			g.Expect(c).NotTo(BeNil())
			return c.Reason
		}
	}

	It("lets an instance whose servers never started go without a flush, and still flushes one that was Ready", func() {
		w := newWorld()
		broken := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, broken)).To(Succeed())
		Eventually(func(g Gomega) bool { return get(broken)(g).Status.NeverReady }, 20*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(k8sClient.Delete(ctx, broken)).To(Succeed())
		Eventually(gone(broken), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(eventReasons(w.ns, broken.Name)).To(ContainElement(cachev1alpha1.ReasonNeverReady))

		// Once Ready, an instance is flushed at teardown whatever its servers do.
		inst, _ := ready(w, nil)
		Expect(get(inst)(Default).Status.NeverReady).To(BeFalse())
		breakWriteBack(w)
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(flushedReason(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.ReasonFlushFailed))
		Consistently(gone(inst), 2*time.Second, 200*time.Millisecond).Should(BeFalse())
		fixWriteBack(w)
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	It("removes, after the write-back, the hidden names that files unlinked while open keep when their mount dies", func() {
		w := newWorld()
		inst, addrs := started(w, nil)
		data := bytes.Repeat([]byte("scratch!"), 64<<10)
		hideThroughMount(inst, addrs, "results/scratch.tmp", data)
		hidden := func() []string {
			m, err := filepath.Glob(filepath.Join(w.hostPath(w.backing), "results", ".burstcache-open-*"))
			Expect(err).NotTo(HaveOccurred())
			return m
		}
		Expect(hidden()).To(HaveLen(1), "the mount gave the unlinked file no hidden name")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(hidden()).To(BeEmpty())
		Expect(eventReasons(w.ns, inst.Name)).NotTo(ContainElement(cachev1alpha1.ReasonHiddenNamesLeft))
	})

	It("gives a file hidden for a rename that failed its name back when its mount ended first, and says so", func() {
		w := newWorld()
		inst, addrs := started(w, nil)
		// A mount that hid f for a rename of g over it, and ended before
		// the rename or before it could give f its name back: the
		// servers' client does what such a mount did, and no more.
		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: cachev1alpha1.DataSecretName(inst.Name)}, sec)).To(Succeed())
		c, err := bcclient.New(bcclient.Options{Servers: addrs, Secret: bytes.TrimSpace(sec.Data[cachev1alpha1.DataSecretKey])})
		Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		for _, name := range []string{"f", "g"} {
			_, err := c.Create(ctx, name, os.O_RDWR|os.O_CREATE, 0o644)
			Expect(err).NotTo(HaveOccurred())
			_, err = c.WriteAt(ctx, name, []byte("data of "+name), 0)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Flush(ctx, name)).To(Succeed())
		}
		g, err := c.GetAttr(ctx, "g")
		Expect(err).NotTo(HaveOccurred())
		const hidden = ".burstcache-open-f"
		Expect(c.NoteHidden(ctx, hidden, namespace.Hiding{Name: "f", Source: "g", SourceIno: g.Ino})).To(Succeed())
		Expect(c.Rename(ctx, "f", hidden, 0)).To(Succeed())

		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		for name, data := range map[string]string{"f": "data of f", "g": "data of g"} {
			Expect(os.ReadFile(filepath.Join(w.hostPath(w.backing), name))).To(Equal([]byte(data)))
		}
		Expect(filepath.Join(w.hostPath(w.backing), hidden)).NotTo(BeAnExistingFile())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonFilesGivenBack))
	})

	It("creates no server for an instance that its reconciler's cache still shows after it is gone", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func() int { return len(serverPods(inst)) }, 20*time.Second, 200*time.Millisecond).Should(Equal(1))
		stale := get(inst)(Default)
		Expect(stale.Status.Servers).NotTo(BeEmpty())
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(serverPods(inst)).To(BeEmpty())

		// A pass on a cache that lags behind the deletion, as a busy
		// manager's can: this reconciler reads the instance as it was, and
		// everything else from the API server. The lag cannot be made to
		// happen at will with a real cache, so a client stands in for it.
		r := &cacheinstance.Reconciler{
			Client: laggingCache{Client: k8sClient, inst: stale}, APIReader: k8sClient,
			Recorder: events.NewFakeRecorder(100), Options: cacheinstance.Options{Resolver: kl.Resolve, Now: time.Now, ServerImage: "burstcache:latest"},
		}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(inst)})
		Expect(err).NotTo(HaveOccurred())
		Expect(serverPods(inst)).To(BeEmpty(), "a server pod was created for a deleted instance; its finalizer would hold it forever")
	})

	It("refuses to delete the namespace of an instance, whose servers would go before its data is written back", func() {
		w := newWorld()
		inst, data := ready(w, nil)
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: w.ns}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue(cachev1alpha1.LabelHoldsInstances, "true"),
			"the namespace of an instance with servers is not labelled: its guard would fail open while the manager is down")
		err := k8sClient.Delete(ctx, ns)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "deleting the namespace: %v", err)
		Expect(err.Error()).To(ContainSubstring(inst.Name))
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(outFile(w))).To(Equal(data))
		Expect(k8sClient.Delete(ctx, ns)).To(Succeed())
	})

	It("goes on, with a warning, where a policy of the cluster keeps the label off its namespace", func() {
		w := newWorld()
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: w.ns}, ns)).To(Succeed())
		ns.Labels["locked"] = "true"
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())
		// A policy that refuses the label on namespaces labelled locked, as
		// a cluster's own admission rules may.
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "locked-namespaces-"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"locked": "true"}},
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}},
					}}},
				},
				Validations: []admissionregistrationv1.Validation{{
					Expression: "object.metadata.labels == oldObject.metadata.labels",
					Message:    "the labels of locked namespaces are the admins'",
				}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, policy)).To(Succeed()) })
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "locked-namespaces-"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, binding)).To(Succeed()) })
		// The policy takes a moment to apply.
		Eventually(func() error {
			probe := ns.DeepCopy()
			probe.Labels["probe"] = "x"
			return k8sClient.Update(ctx, probe, client.DryRunAll)
		}).WithTimeout(10 * time.Second).Should(HaveOccurred())

		inst, _ := ready(w, nil)
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonNamespaceUnguarded))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: w.ns}, ns)).To(Succeed())
		Expect(ns.Labels).NotTo(HaveKey(cachev1alpha1.LabelHoldsInstances))
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	It("holds the instance while a pod mounts it and a server has dirty data, and lets go after the flush", func() {
		w := newWorld()
		inst, data := ready(w, nil)
		user := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: w.ns, Labels: map[string]string{cachev1alpha1.LabelInstance: inst.Name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "job", Image: "job"}}},
		}
		Expect(k8sClient.Create(ctx, user)).To(Succeed())

		By("deleting in the foreground, which would make the garbage collector delete dependents first")
		Expect(k8sClient.Delete(ctx, inst, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(flushedReason(inst), 10*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.ReasonWaitingForUnmount))
		Consistently(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseFlushing))
			g.Expect(cur.Status.ActiveMounts).To(ConsistOf(HaveField("Pod", "job")))
			g.Expect(serverPods(inst)).To(HaveLen(1))
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
		Expect(os.ReadFile(outFile(w))).NotTo(Equal(data), "written back before the mount was gone")

		By("letting the flush run once the pod is gone")
		Expect(k8sClient.Delete(ctx, user)).To(Succeed())
		// envtest runs no garbage collector to lift the foregroundDeletion
		// finalizer, so the instance is done once ours is gone.
		Eventually(func(g Gomega) []string {
			return get(inst)(g).Finalizers
		}, 30*time.Second, 200*time.Millisecond).ShouldNot(ContainElement(cachev1alpha1.Finalizer))
		Expect(os.ReadFile(outFile(w))).To(Equal(data))
		Expect(serverPods(inst)).To(BeEmpty())
	})

	It("keeps retrying a failing flush across a manager restart, and loses nothing", func() {
		w := newWorld()
		inst, data := ready(w, nil)
		breakWriteBack(w)
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(flushedReason(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.ReasonFlushFailed))
		Eventually(func() []string { return eventReasons(w.ns, inst.Name) }, 10*time.Second).Should(ContainElement(cachev1alpha1.ReasonFlushFailed))
		Expect(get(inst)(Default).Status.Flush.BytesRemaining).To(BeNumerically(">", 0))

		By("restarting the manager while the instance is Flushing")
		stopMgr()
		Consistently(func(g Gomega) {
			g.Expect(get(inst)(g).Finalizers).To(ContainElement(cachev1alpha1.Finalizer))
		}, 2*time.Second, 500*time.Millisecond).Should(Succeed())
		fixWriteBack(w)
		stopMgr = startManager()
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(outFile(w))).To(Equal(data))
	})

	It("brings back a server pod deleted during the flush on its node, which resumes with its data", func() {
		w := newWorld()
		inst, data := ready(w, nil)
		breakWriteBack(w)
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(flushedReason(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.ReasonFlushFailed))

		By("deleting the server pod, as a careless admin would")
		old := serverPods(inst)[0]
		Expect(k8sClient.Delete(ctx, &old)).To(Succeed())
		kl.Stop(old.Namespace + "/" + old.Name)
		Eventually(func(g Gomega) {
			pods := serverPods(inst)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].UID).NotTo(Equal(old.UID))
			g.Expect(pods[0].Spec.NodeSelector).To(Equal(old.Spec.NodeSelector))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		By("running the new pod's server over the same cache directory")
		fixWriteBack(w)
		kl.RunServers(ctx, inst, 1)
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(outFile(w))).To(Equal(data))
	})

	It("does not finish a teardown on an unsigned answer that nothing is left, from whoever took a server's address", func() {
		w := newWorld()
		inst, data := ready(w, nil)
		pod := serverPods(inst)[0]
		Expect(pod.Annotations).To(HaveKeyWithValue(cachev1alpha1.AnnotationControlProtocol, "4"))

		By("answering at the server's address, without the secret, that the server is clean and drained")
		stop := kl.Impersonate(kubelet.PodKey(&pod), http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/v1/stats":
				_, _ = rw.Write([]byte(`{"server":{"index":0,"servers":1},"dirtyBytes":0}`))
			case "/v1/drain", "/v1/flush":
				_, _ = rw.Write([]byte(`{"remainingBytes":0}`))
			default:
				_, _ = rw.Write([]byte(`{}`))
			}
		}))
		DeferCleanup(stop)
		Expect(os.ReadFile(outFile(w))).NotTo(Equal(data), "the stopped server wrote its data back")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionFlushed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonFlushFailed))
			return c.Message
		}, 20*time.Second, 200*time.Millisecond).Should(ContainSubstring("not signed"))
		Consistently(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Finalizers).To(ContainElement(cachev1alpha1.Finalizer))
			g.Expect(cur.Status.Usage.Dirty.Value()).To(BeNumerically(">=", len(data)))
			g.Expect(serverPods(inst)).To(HaveLen(1))
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())

		By("running the pod's server again, which writes the data back")
		stop()
		kl.RunServers(ctx, inst, 1)
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(outFile(w))).To(Equal(data))
	})

	It("goes past a failing flush when the user switches to Discard, records it, and leaves no cache files", func() {
		w := newWorld()
		inst, _ := ready(w, nil)
		pod := serverPods(inst)[0]
		breakWriteBack(w)
		DeferCleanup(func() { fixWriteBack(w) })
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(flushedReason(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.ReasonFlushFailed))
		Consistently(gone(inst), 2*time.Second, 500*time.Millisecond).Should(BeFalse())

		Eventually(func() error {
			cur := get(inst)(Default)
			cur.Spec.Teardown = &cachev1alpha1.Teardown{Policy: cachev1alpha1.TeardownDiscard}
			return k8sClient.Update(ctx, cur)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonDiscarded))

		By("the discarded server removed its cache files, dirty data included, from the node when its pod stopped")
		kl.Stop(pod.Namespace + "/" + pod.Name)
		hostDir := filepath.Join(kl.Root, "nvme", inst.Namespace, inst.Name+"-"+string(inst.UID))
		Expect(filepath.Join(hostDir, "server-0")).To(BeADirectory())
		Expect(filepath.Glob(filepath.Join(hostDir, "server-*", "extents"))).To(BeEmpty())
	})

	It("goes past a failing flush when the user's timeout expires, and records it", func() {
		w := newWorld()
		inst, _ := ready(w, func(i *cachev1alpha1.CacheInstance) {
			i.Spec.Teardown = &cachev1alpha1.Teardown{Timeout: &metav1.Duration{Duration: 4 * time.Second}}
		})
		breakWriteBack(w)
		DeferCleanup(func() { fixWriteBack(w) })
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(flushedReason(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.ReasonFlushFailed))
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonFlushTimedOut))
	})

	It("does not wait for pods still held back by the scheduling gate, which never mounted it", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		held := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: w.ns, Labels: map[string]string{cachev1alpha1.LabelInstance: inst.Name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "job", Image: "job"}}},
		}
		Expect(k8sClient.Create(ctx, held)).To(Succeed())
		Expect(held.Spec.SchedulingGates).To(ContainElement(HaveField("Name", cachev1alpha1.SchedulingGate)))

		// The pod waits for the instance to be Ready, which a deleted
		// instance never is again.
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue(),
			"the teardown waits for a pod that waits for the instance")
		Expect(k8sClient.Delete(ctx, held)).To(Succeed())
	})
})

// laggingCache answers reads of one instance with a copy older than the
// API server's, as a manager's cache does for a moment after a change.
type laggingCache struct {
	client.Client
	inst *cachev1alpha1.CacheInstance
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if in, ok := obj.(*cachev1alpha1.CacheInstance); ok && key == client.ObjectKeyFromObject(c.inst) {
		c.inst.DeepCopyInto(in)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
