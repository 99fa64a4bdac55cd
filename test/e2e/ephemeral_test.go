//go:build e2e

package e2e

import (
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("A Job with a generic ephemeral cache volume", func() {
	It("writes and reads through the cache, completes, and leaves byte-identical files on the PFS", func() {
		w := newWorld("jobdw")
		// Sizes that are not multiples of the 1 MiB extent, so partial
		// extents and file sizes known only to the cache are written back too.
		const count, size = 4, 3<<20 + 12345
		backing := w.mkdirPFS("run")
		job := cacheJob(w, "writer", cacheAnnotations(backing),
			"write", "/cache", strconv.Itoa(count), strconv.Itoa(size))
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		By("the job completing, its pod having written and reread the files through the cache")
		expectJobSucceeded(job)
		pods := jobPods(job)
		Expect(pods).To(HaveLen(1))
		Expect(podLogs(w.ns, pods[0].Name)).To(ContainSubstring("verified 4 files"))
		By("the cache of the pod's claim being a Ready CacheInstance of the backing path while the pod exists")
		inst := instanceOfPod(&pods[0])
		Expect(string(inst.Spec.Backing.Path)).To(Equal(backing))
		Expect(inst.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))

		By("deleting the job, its pod, and with it the claim, the PV and the CacheInstance")
		Expect(k8sClient.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(w.instances).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(BeEmpty())
		Eventually(func(g Gomega) []corev1.PersistentVolumeClaim {
			l := &corev1.PersistentVolumeClaimList{}
			g.Expect(k8sClient.List(ctx, l, client.InNamespace(w.ns))).To(Succeed())
			return l.Items
		}).WithTimeout(time.Minute).Should(BeEmpty())
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Name: inst.Name}, &corev1.PersistentVolume{})
		}).WithTimeout(time.Minute).Should(MatchError(ContainSubstring("not found")))

		By("finding on the PFS, read on the host, exactly the bytes the job wrote")
		expectPattern(backing, count, size)
		Expect(filepath.Join(backing, "file-004")).NotTo(BeAnExistingFile())
	})
})

// cacheJob is a Job of one pod that runs the workload with args, with a
// generic ephemeral volume of w's class whose claim carries annotations.
func cacheJob(w *world, name string, annotations map[string]string, args ...string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{workloadContainer(args...)},
				Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{
					Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
						ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
						Spec: corev1.PersistentVolumeClaimSpec{
							AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
							StorageClassName: ptr.To(w.class),
							Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceStorage: resource.MustParse("1Gi"),
							}},
						},
					}},
				}}},
			}},
		},
	}
}

func expectJobSucceeded(job *batchv1.Job) {
	GinkgoHelper()
	Eventually(func(g Gomega) int32 {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.Status.Failed).To(BeZero(), "the job failed: %s", jobLogs(job))
		return job.Status.Succeeded
	}).WithTimeout(4*time.Minute).WithPolling(2*time.Second).Should(BeEquivalentTo(1), "events: %s", eventsOf(job.Namespace))
}

func jobPods(job *batchv1.Job) []corev1.Pod {
	GinkgoHelper()
	l := &corev1.PodList{}
	Expect(k8sClient.List(ctx, l, client.InNamespace(job.Namespace), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
	return l.Items
}

func jobLogs(job *batchv1.Job) string {
	out := ""
	for _, p := range jobPods(job) {
		out += p.Name + ": " + podLogs(p.Namespace, p.Name) + "\n"
	}
	return out
}

// instanceOfPod returns the CacheInstance behind the pod's "cache" claim,
// whose PV and instance share a name.
func instanceOfPod(pod *corev1.Pod) *cachev1alpha1.CacheInstance {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name + "-cache"}, pvc)).To(Succeed())
	inst := &cachev1alpha1.CacheInstance{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pvc.Spec.VolumeName}, inst)).To(Succeed())
	return inst
}

// eventsOf lists a namespace's events, for failure messages.
func eventsOf(ns string) string {
	l := &corev1.EventList{}
	if err := k8sClient.List(ctx, l, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	out := ""
	for _, e := range l.Items {
		out += "\n" + e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name + " " + e.Reason + ": " + e.Message
	}
	return out
}
