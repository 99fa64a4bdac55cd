package controllers_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/cacheinstance"
)

// localClass creates a StorageClass of statically provisioned local PVs,
// as local-static-provisioner sets up for NVMe drives.
func localClass() *storagev1.StorageClass {
	GinkgoHelper()
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: "local-nvme-"},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &mode,
	}
	Expect(k8sClient.Create(ctx, sc)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, sc))).To(Succeed()) })
	return sc
}

// classMedia makes a pool keep its cache data on claims of the class.
func classMedia(name string) func(*cachev1alpha1.CachePool) {
	return func(p *cachev1alpha1.CachePool) {
		p.Spec.Media.HostPath, p.Spec.Media.StorageClass = nil, &cachev1alpha1.StorageClassMedia{Name: name}
	}
}

// cacheClaims lists the instance's cache claims.
func cacheClaims(inst *cachev1alpha1.CacheInstance) []corev1.PersistentVolumeClaim {
	GinkgoHelper()
	var list corev1.PersistentVolumeClaimList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(inst.Namespace), client.MatchingLabels{
		cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
	})).To(Succeed())
	return list.Items
}

// claimsGone reports whether the instance's cache claims are gone. Without
// a kube-controller-manager it plays the PVC protection controller, which
// lifts kubernetes.io/pvc-protection of a deleted claim no pod uses; it
// never touches a claim that still holds burstcache's finalizer.
func claimsGone(inst *cachev1alpha1.CacheInstance) func() bool {
	return func() bool {
		claims := cacheClaims(inst)
		for i := range claims {
			c := &claims[i]
			if kcm || c.DeletionTimestamp == nil || slices.Contains(c.Finalizers, cachev1alpha1.ServerProtectionFinalizer) {
				continue
			}
			c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == "kubernetes.io/pvc-protection" })
			_ = k8sClient.Update(ctx, c)
		}
		return len(claims) == 0
	}
}

// dirBytes sums the sizes of the files under dir.
func dirBytes(dir string) int64 {
	GinkgoHelper()
	var n int64
	Expect(filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})).To(Succeed())
	return n
}

var _ = Describe("StorageClass media", func() {
	It("gives each server a protected claim of the class as its cache, and deletes it only after the flush", func() {
		sc := localClass()
		w := newWorld(classMedia(sc.Name))
		inst := w.instance("128Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())

		By("creating one claim per server, of the class and the server's capacity, that the pod mounts as its cache")
		Eventually(func() []corev1.PersistentVolumeClaim { return cacheClaims(inst) }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(2))
		var pods []corev1.Pod
		Eventually(func() []corev1.Pod { pods = serverPods(inst); return pods }, 20*time.Second, 200*time.Millisecond).Should(HaveLen(2))
		for i := range pods {
			expectClaimOf(inst, &pods[i], sc.Name)
		}
		addrs := kl.RunServers(ctx, inst, 2)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		data := bytes.Repeat([]byte("0123456789abcdef"), 128<<10) // 2Mi
		writeThroughMount(inst, addrs, "results/out.dat", data)
		Eventually(func(g Gomega) int64 {
			return get(inst)(g).Status.Usage.Dirty.Value()
		}, 20*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", len(data)))
		Expect(dirBytes(kl.ClaimDir(w.ns, cacheinstance.CacheClaimName(inst, 0)))+
			dirBytes(kl.ClaimDir(w.ns, cacheinstance.CacheClaimName(inst, 1)))).To(BeNumerically(">=", len(data)),
			"the servers' data is not on their claims")

		By("keeping a claim a user deletes while the instance lives")
		victim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: cacheinstance.CacheClaimName(inst, 0)}}
		Expect(k8sClient.Delete(ctx, victim)).To(Succeed())
		Consistently(func(g Gomega) {
			cur := &corev1.PersistentVolumeClaim{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(victim), cur)).To(Succeed())
			g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
			g.Expect(cur.Finalizers).To(ContainElement(cachev1alpha1.ServerProtectionFinalizer))
			g.Expect(get(inst)(g).Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())

		By("holding the claims while the write-back fails, across a manager restart")
		out := filepath.Join(w.hostPath(w.backing), "results", "out.dat")
		Expect(os.Chown(out, 2000, 2000)).To(Succeed())
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionFlushed)
			g.Expect(c).NotTo(BeNil())
			return c.Reason
		}, 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.ReasonFlushFailed))
		stopMgr()
		stopMgr = startManager()
		Consistently(func(g Gomega) {
			claims := cacheClaims(inst)
			g.Expect(claims).To(HaveLen(2))
			g.Expect(claims).To(HaveEach(HaveField("Finalizers", ContainElement(cachev1alpha1.ServerProtectionFinalizer))))
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())

		By("deleting the claims once the flush ended, and only then letting the instance go")
		Expect(os.Chown(out, runAsUID, runAsGID)).To(Succeed())
		Eventually(claimsGone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(out)).To(Equal(data))
	})

	It("does not give a running server an empty claim when its claim was forced away, and says so", func() {
		sc := localClass()
		w := newWorld(classMedia(sc.Name))
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		By("forcing every finalizer off the claim and deleting it, as a careless admin would")
		claim := &cacheClaims(inst)[0]
		Eventually(func() error {
			cur := &corev1.PersistentVolumeClaim{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), cur); err != nil {
				return err
			}
			cur.Finalizers = nil
			return k8sClient.Update(ctx, cur)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(k8sClient.Delete(ctx, claim)).To(Succeed())
		Eventually(gone(claim), 10*time.Second, 100*time.Millisecond).Should(BeTrue())

		Eventually(func() []string { return eventReasons(w.ns, inst.Name) }, 20*time.Second, 200*time.Millisecond).
			Should(ContainElement(cachev1alpha1.ReasonMediaUnavailable))
		Consistently(func() []corev1.PersistentVolumeClaim { return cacheClaims(inst) }, 3*time.Second, 500*time.Millisecond).Should(BeEmpty())

		By("still writing back and letting the instance go, since the running server kept its volume")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	It("reports MediaUnavailable while the pool's class is missing, and Ready once it exists", func() {
		name := "nvme-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		w := newWorld(classMedia(name))
		readyOf := func(g Gomega) *metav1.Condition {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), w.pool)).To(Succeed())
			c := meta.FindStatusCondition(w.pool.Status.Conditions, cachev1alpha1.ConditionPoolReady)
			g.Expect(c).NotTo(BeNil())
			return c
		}
		Eventually(func(g Gomega) {
			c := readyOf(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonMediaUnavailable))
			g.Expect(c.Message).To(ContainSubstring("StorageClass " + name))
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(w.pool.Status.TotalCapacity.Cmp(resource.MustParse("768Mi"))).To(Equal(0), "capacityPerNode bounds each of the 3 nodes")

		mode := storagev1.VolumeBindingWaitForFirstConsumer
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &mode}
		Expect(k8sClient.Create(ctx, sc)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, sc))).To(Succeed()) })
		Eventually(func(g Gomega) metav1.ConditionStatus { return readyOf(g).Status }, 20*time.Second, 200*time.Millisecond).
			Should(Equal(metav1.ConditionTrue))
	})
})

// expectClaimOf checks the cache claim of a server pod: the class, room
// for the server's capacity, the instance's labels, the protection finalizer and
// no owner the garbage collector could act on, mounted as the cache.
func expectClaimOf(inst *cachev1alpha1.CacheInstance, pod *corev1.Pod, class string) {
	GinkgoHelper()
	name := cacheinstance.CacheClaimName(inst, indexOf(pod))
	pvc := &corev1.PersistentVolumeClaim{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: name}, pvc)).To(Succeed())
	Expect(pvc.Spec.StorageClassName).To(HaveValue(Equal(class)))
	// Room for the server's 64Mi and what it and the file system take
	// beyond it (test/integration starts a server on a volume this size).
	Expect(pvc.Spec.Resources.Requests.Storage().Cmp(cacheinstance.CacheClaimSize(64<<20, 1<<20))).To(Equal(0))
	Expect(pvc.Labels).To(Equal(map[string]string{
		cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelPool: inst.Spec.Pool,
		cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer, cachev1alpha1.LabelServerIndex: pod.Labels[cachev1alpha1.LabelServerIndex],
	}))
	Expect(pvc.Finalizers).To(ContainElement(cachev1alpha1.ServerProtectionFinalizer))
	Expect(pvc.OwnerReferences).To(BeEmpty())
	Expect(pod.Spec.Volumes).To(ContainElement(And(HaveField("Name", "cache"),
		HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", name))))
	Expect(pod.Spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("Name", "cache")))
}
