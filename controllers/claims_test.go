package controllers_test

import (
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/params"
)

// Helpers for the provisioning specs. When the suite runs a real
// kube-controller-manager (kcm_test.go), they wait for its PV binder,
// protection and ephemeral volume controllers. Without one, they play the
// parts of it that the provisioning contract relies on: binding a claim to
// the PV the provisioner made for it, letting a deleted claim or PV go once
// nothing uses it, and creating an ephemeral volume's claim. They do only
// what those controllers would; the provisioner runs for real either way.

// storageClass creates a burstcache StorageClass of the world's pool with
// extra parameters; "$BACKING" in a value stands for the world's backing
// path.
func (w *world) storageClass(reclaim corev1.PersistentVolumeReclaimPolicy, mode storagev1.VolumeBindingMode, extra map[string]string) *storagev1.StorageClass {
	GinkgoHelper()
	p := w.expand(extra)
	p[params.Pool] = w.pool.Name
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: "burstcache-"},
		Provisioner: cachev1alpha1.DriverName, Parameters: p,
		ReclaimPolicy: &reclaim, VolumeBindingMode: &mode, MountOptions: []string{"noatime"},
	}
	Expect(k8sClient.Create(ctx, sc)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, sc))).To(Succeed()) })
	return sc
}

func (w *world) expand(keys map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range keys {
		out[k] = strings.ReplaceAll(v, "$BACKING", w.backing)
	}
	return out
}

// claim creates a PVC of the class asking for size, with annotations that
// set volume keys (without their prefix).
func (w *world) claim(sc *storagev1.StorageClass, size string, keys map[string]string) *corev1.PersistentVolumeClaim {
	GinkgoHelper()
	pvc := w.claimObject(sc, size, keys)
	Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
	return pvc
}

func (w *world) claimObject(sc *storagev1.StorageClass, size string, keys map[string]string) *corev1.PersistentVolumeClaim {
	ann := map[string]string{}
	for k, v := range w.expand(keys) {
		ann[params.AnnotationPrefix+k] = v
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "data-", Namespace: w.ns, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc.Name,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// volumeOf waits for the PV the provisioner makes for the claim.
func volumeOf(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	GinkgoHelper()
	pv := &corev1.PersistentVolume{}
	Eventually(func() error {
		return k8sClient.Get(ctx, client.ObjectKey{Name: "pvc-" + string(pvc.UID)}, pv)
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	return pv
}

// bind does what the PV controller does with a provisioned PV: it binds the
// claim to it and marks both Bound.
func bind(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	GinkgoHelper()
	Expect(pv.Spec.ClaimRef).NotTo(BeNil())
	Expect(pv.Spec.ClaimRef.UID).To(Equal(pvc.UID))
	if kcm {
		Eventually(func(g Gomega) {
			cur := &corev1.PersistentVolumeClaim{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pvc), cur)).To(Succeed())
			g.Expect(cur.Spec.VolumeName).To(Equal(pv.Name))
			g.Expect(cur.Status.Phase).To(Equal(corev1.ClaimBound))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the PV binder did not bind the claim")
		return
	}
	Eventually(func() error {
		cur := &corev1.PersistentVolumeClaim{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pvc), cur); err != nil {
			return err
		}
		cur.Spec.VolumeName = pv.Name
		if err := k8sClient.Update(ctx, cur); err != nil {
			return err
		}
		cur.Status.Phase = corev1.ClaimBound
		cur.Status.Capacity = pv.Spec.Capacity
		cur.Status.AccessModes = pv.Spec.AccessModes
		return k8sClient.Status().Update(ctx, cur)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	Eventually(func() error {
		cur := &corev1.PersistentVolume{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pv), cur); err != nil {
			return err
		}
		cur.Status.Phase = corev1.VolumeBound
		return k8sClient.Status().Update(ctx, cur)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// deleteClaim deletes a claim and, as the PVC protection controller does
// once no pod uses it, lifts its protection finalizer. The PV controller
// would then mark the claim's PV Released; the provisioner does not need
// that, it sees the claim go.
func deleteClaim(pvc *corev1.PersistentVolumeClaim) {
	GinkgoHelper()
	Expect(k8sClient.Delete(ctx, pvc)).To(Succeed())
	if kcm {
		Eventually(gone(pvc), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		return
	}
	Eventually(func() error {
		cur := &corev1.PersistentVolumeClaim{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pvc), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == "kubernetes.io/pvc-protection" })
		return k8sClient.Update(ctx, cur)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	Eventually(gone(pvc), 10*time.Second, 100*time.Millisecond).Should(BeTrue())
}

// volumeGone reports whether the PV is gone, playing the PV protection
// controller first: a deleted PV that no claim is bound to loses its
// protection finalizer.
func volumeGone(pv *corev1.PersistentVolume) func() bool {
	return func() bool {
		cur := &corev1.PersistentVolume{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pv), cur); err != nil {
			return client.IgnoreNotFound(err) == nil
		}
		if !kcm && cur.DeletionTimestamp != nil && slices.Contains(cur.Finalizers, "kubernetes.io/pv-protection") {
			cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == "kubernetes.io/pv-protection" })
			_ = k8sClient.Update(ctx, cur)
		}
		return false
	}
}

// instanceOf returns the CacheInstance key a volume handle names.
func instanceOf(pv *corev1.PersistentVolume) *cachev1alpha1.CacheInstance {
	ns, name, ok := strings.Cut(pv.Spec.CSI.VolumeHandle, "/")
	Expect(ok).To(BeTrue())
	return &cachev1alpha1.CacheInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// eventMessages returns "Reason: message" of the Events about the named
// object.
func eventMessages(ns, name string) []string {
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// noVolume asserts that no PV is made for the claim for a while.
func noVolume(pvc *corev1.PersistentVolumeClaim, d time.Duration) {
	GinkgoHelper()
	Consistently(func() bool {
		return gone(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(pvc.UID)}})()
	}, d, 200*time.Millisecond).Should(BeTrue(), "a PV was provisioned")
}

func resourceOf(s string) resource.Quantity { return resource.MustParse(s) }

// ephemeralClaim returns the claim of a pod's generic ephemeral volume,
// made by the ephemeral volume controller, or as it would make it.
func ephemeralClaim(pod *corev1.Pod, volume string, tmpl *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{}
	key := client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name + "-" + volume}
	if kcm {
		Eventually(func() error { return k8sClient.Get(ctx, key, pvc) }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	} else {
		pvc = tmpl.DeepCopy()
		pvc.GenerateName, pvc.Name = "", key.Name
		pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
		Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
	}
	Expect(pvc.OwnerReferences).To(ConsistOf(HaveField("UID", pod.UID)))
	return pvc
}
