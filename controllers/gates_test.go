package controllers_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/webhooks"
)

// jobPod is a pod of a job that uses instance by its label.
func jobPod(ns, name, instance string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{cachev1alpha1.LabelInstance: instance}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "job", Image: "job"}}},
	}
}

// cacheGate is the scheduling gate that holds pods for their instances.
var cacheGate = corev1.PodSchedulingGate{Name: cachev1alpha1.SchedulingGate}

var _ = Describe("Scheduling gates", func() {
	gates := func(pod *corev1.Pod) func(Gomega) []corev1.PodSchedulingGate {
		return func(g Gomega) []corev1.PodSchedulingGate {
			cur := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), cur)).To(Succeed())
			return cur.Spec.SchedulingGates
		}
	}
	// directiveClass is the StorageClass through which #DW directives mount
	// the world's instances.
	directiveClass := func(w *world) *storagev1.StorageClass {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "dw-" + w.ns},
			Provisioner: cachev1alpha1.DriverName, Parameters: map[string]string{"pool": w.pool.Name}}
		Expect(k8sClient.Create(ctx, sc)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, sc))).To(Succeed()) })
		return sc
	}
	// directiveMount returns the claim template of the volume the directives
	// added, after checking that every container mounts it at path.
	directiveMount := func(pod *corev1.Pod, path string) *corev1.PersistentVolumeClaimTemplate {
		GinkgoHelper()
		var tmpl *corev1.PersistentVolumeClaimTemplate
		for _, v := range pod.Spec.Volumes {
			if v.Name == webhooks.DirectiveVolume {
				Expect(v.Ephemeral).NotTo(BeNil())
				tmpl = v.Ephemeral.VolumeClaimTemplate
			}
		}
		Expect(tmpl).NotTo(BeNil(), "the directives added no volume")
		for _, c := range pod.Spec.Containers {
			Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: webhooks.DirectiveVolume, MountPath: path}))
		}
		return tmpl
	}

	It("holds a job's pods until its instance is Ready, then lets them go", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		early := jobPod(w.ns, "early", inst.Name)
		Expect(k8sClient.Create(ctx, early)).To(Succeed())
		Expect(early.Spec.SchedulingGates).To(ContainElement(cacheGate))
		other := jobPod(w.ns, "unrelated", "")
		delete(other.Labels, cachev1alpha1.LabelInstance)
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		Expect(other.Spec.SchedulingGates).To(BeEmpty())
		Consistently(gates(early), 2*time.Second, 500*time.Millisecond).Should(ContainElement(cacheGate))

		kl.RunServers(ctx, inst, 1)
		Eventually(gates(early), 20*time.Second, 200*time.Millisecond).ShouldNot(ContainElement(cacheGate))
		Expect(phaseOf(inst)(Default)).To(Equal(cachev1alpha1.PhaseReady))

		late := jobPod(w.ns, "late", inst.Name)
		Expect(k8sClient.Create(ctx, late)).To(Succeed())
		Expect(late.Spec.SchedulingGates).To(BeEmpty(), "a pod of a Ready instance was gated")
		for _, p := range []*corev1.Pod{early, other, late} {
			Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		}
	})

	It("tells the pods it holds when their instance is deleted before it was Ready", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		waiting := jobPod(w.ns, "waiting", inst.Name)
		Expect(k8sClient.Create(ctx, waiting)).To(Succeed())
		Expect(waiting.Spec.SchedulingGates).To(ContainElement(cacheGate))
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
		Expect(eventReasons(w.ns, waiting.Name)).NotTo(ContainElement(cachev1alpha1.ReasonInstanceUnavailable))

		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(func() []string { return eventReasons(w.ns, waiting.Name) }, 30*time.Second, 200*time.Millisecond).
			Should(ContainElement(cachev1alpha1.ReasonInstanceUnavailable))
		Expect(gates(waiting)(Default)).To(ContainElement(cacheGate), "a pod of a deleted instance was let go")
		Expect(k8sClient.Delete(ctx, waiting)).To(Succeed())
	})

	It("never gates a mount pod of the CSI node plugin, which is pinned to its node", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		mount := jobPod(w.ns, "mount", inst.Name)
		mount.Labels[cachev1alpha1.LabelComponent] = "mount-daemon"
		mount.Spec.NodeName = "node-a"
		Expect(k8sClient.Create(ctx, mount)).To(Succeed())
		Expect(mount.Spec.SchedulingGates).To(BeEmpty())
		Expect(k8sClient.Delete(ctx, mount)).To(Succeed())
	})

	It("refuses a pod whose DataWarp directives cannot be honoured, naming the line", func() {
		w := newWorld()
		pod := jobPod(w.ns, "dw", "")
		delete(pod.Labels, cachev1alpha1.LabelInstance)
		pod.Annotations = map[string]string{cachev1alpha1.AnnotationDirective: "#DW jobdw type=cache pfs=/lus/run capacity=1TiB\n" +
			"#DW stage_in source=/etc/passwd destination=$DW_JOB_STRIPED/passwd type=file"}
		err := k8sClient.Create(ctx, pod)
		Expect(err).To(MatchError(And(ContainSubstring("line 2"), ContainSubstring("not under pfs"))))

		By("refusing a pod whose two directive annotations disagree")
		pod.Annotations[cachev1alpha1.AnnotationDirectiveAlias] = "#DW persistentdw name=shared"
		Expect(k8sClient.Create(ctx, pod)).To(MatchError(ContainSubstring("differs from annotation " + cachev1alpha1.AnnotationDirectiveAlias)))

		By("refusing a persistentdw of an instance that does not exist")
		delete(pod.Annotations, cachev1alpha1.AnnotationDirective)
		Expect(k8sClient.Create(ctx, pod.DeepCopy())).To(MatchError(ContainSubstring("no CacheInstance shared")))

		By("reading the earlier annotation name alone, and mounting the named instance where it caches")
		inst := w.instance("64Mi")
		inst.GenerateName, inst.Name = "", "shared"
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		sc := directiveClass(w)
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue(cachev1alpha1.LabelInstance, "shared"))
		Expect(pod.Spec.SchedulingGates).To(ContainElement(cacheGate))
		tmpl := directiveMount(pod, w.backing)
		Expect(tmpl.Annotations).To(HaveKeyWithValue("csi.burstcache.io/instance", "shared"))
		Expect(tmpl.Spec.StorageClassName).To(HaveValue(Equal(sc.Name)))
		Expect(pod.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "DW_PERSISTENT_STRIPED_SHARED", Value: w.backing}))
	})

	It("creates a Job's jobdw instance from its pods' directives, as the pods' user", func() {
		w := newWorld()
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "climate-run", Namespace: w.ns},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "job"}},
			}}},
		}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		dw := "#DW jobdw type=cache access_mode=striped pfs=" + w.backing + "/run capacity=100MiB pool=" + w.pool.Name + "\n" +
			"#DW stage_in source=" + w.backing + "/run/in destination=$DW_JOB_STRIPED/in type=directory"
		pod := jobPod(w.ns, "climate-run-0", "")
		delete(pod.Labels, cachev1alpha1.LabelInstance)
		pod.Annotations = map[string]string{cachev1alpha1.AnnotationDirective: dw}
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(runAsUID)), RunAsGroup: ptr(int64(runAsGID))}

		sc := directiveClass(w)
		By("refusing a pod that no Job owns: nothing would tear its instance down")
		Expect(k8sClient.Create(ctx, pod.DeepCopy())).To(MatchError(ContainSubstring("owns")))

		By("refusing a pod of a Job whose name cannot name its instance, saying so")
		long := pod.DeepCopy()
		long.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: strings.Repeat("j", 45), UID: job.UID, Controller: ptr(true)}}
		Expect(k8sClient.Create(ctx, long)).To(MatchError(ContainSubstring("give the Job a name of at most 44")))

		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr(true)}}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue(cachev1alpha1.LabelInstance, "climate-run-dw"))
		Expect(pod.Spec.SchedulingGates).To(ContainElement(cacheGate))

		inst := &cachev1alpha1.CacheInstance{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "climate-run-dw"}, inst)).To(Succeed())
		Expect(inst.Spec.Backing).To(Equal(&cachev1alpha1.BackingPath{Filesystem: "pfs", Path: cachev1alpha1.AbsolutePath(w.backing + "/run")}))
		Expect(inst.Spec.Capacity.Cmp(resource.MustParse("100Mi"))).To(BeZero())
		Expect(inst.Spec.Preload).To(ConsistOf(cachev1alpha1.AbsolutePath(w.backing + "/run/in")))
		Expect(inst.Spec.RunAs.UID).To(BeEquivalentTo(runAsUID))
		Expect(inst.OwnerReferences).To(ConsistOf(HaveField("UID", job.UID)))
		Expect(inst.Spec.WriteBack.Threads).To(HaveValue(BeEquivalentTo(2)), "the pool's defaults were not applied")

		By("mounting the instance where the job's files are, with DataWarp's variables")
		tmpl := directiveMount(pod, w.backing+"/run")
		Expect(tmpl.Annotations).To(HaveKeyWithValue("csi.burstcache.io/instance", "climate-run-dw"))
		Expect(tmpl.Spec.StorageClassName).To(HaveValue(Equal(sc.Name)))
		Expect(tmpl.Spec.Resources.Requests.Storage().Cmp(resource.MustParse("100Mi"))).To(BeZero())
		Expect(pod.Spec.Containers[0].Env).To(ContainElements(
			corev1.EnvVar{Name: "DW_JOB_STRIPED", Value: w.backing + "/run"},
			corev1.EnvVar{Name: "DW_JOB_STRIPED_CACHE", Value: w.backing + "/run"}))
	})

	It("refuses a pod of a new Job whose jobdw instance is still the one of an earlier Job of the same name", func() {
		w := newWorld()
		directiveClass(w)
		newJob := func() *batchv1.Job {
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: "rerun", Namespace: w.ns},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "job"}},
				}}},
			}
			Expect(k8sClient.Create(ctx, job)).To(Succeed())
			return job
		}
		podOf := func(job *batchv1.Job, name, pfs string) *corev1.Pod {
			pod := jobPod(w.ns, name, "")
			delete(pod.Labels, cachev1alpha1.LabelInstance)
			pod.Annotations = map[string]string{cachev1alpha1.AnnotationDirective: "#DW jobdw type=cache pfs=" + pfs +
				" capacity=64MiB pool=" + w.pool.Name}
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(runAsUID)), RunAsGroup: ptr(int64(runAsGID))}
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr(true)}}
			return pod
		}
		first := newJob()
		firstPod := podOf(first, "rerun-a", w.backing+"/a")
		Expect(k8sClient.Create(ctx, firstPod)).To(Succeed())
		old := &cachev1alpha1.CacheInstance{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "rerun-dw"}, old)).To(Succeed())

		By("deleting the Job and running it again, while its instance is still there (writing back, or not yet collected)")
		Expect(k8sClient.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(gone(first), 10*time.Second, 100*time.Millisecond).Should(BeTrue())
		second := newJob()
		pod := podOf(second, "rerun-b", w.backing+"/b")
		err := k8sClient.Create(ctx, pod)
		Expect(err).To(MatchError(And(ContainSubstring("rerun-dw"), ContainSubstring("another"))),
			"the new Job's pod would mount the old Job's instance, of another path, which waits for it to unmount")

		By("accepting the pod once the old instance is gone")
		// envtest has no garbage collector to delete the old Job's pod.
		Expect(k8sClient.Delete(ctx, firstPod)).To(Succeed())
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(gone(old), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		cur := &cachev1alpha1.CacheInstance{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "rerun-dw"}, cur)).To(Succeed())
		Expect(cur.OwnerReferences).To(ConsistOf(HaveField("UID", second.UID)))
		Expect(string(cur.Spec.Backing.Path)).To(Equal(w.backing + "/b"))
	})
})
