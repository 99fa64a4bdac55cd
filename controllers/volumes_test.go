package controllers_test

import (
	"bytes"
	"os"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/instances"
	"github.com/burstcache/burstcache/csi-driver/params"
	"github.com/burstcache/burstcache/csi-driver/provisioner"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

var _ = Describe("CSI volumes", func() {
	immediate, wffc := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	del, retain := corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain
	uid, gid := strconv.Itoa(runAsUID), strconv.Itoa(runAsGID)

	It("provisions a dynamic volume, and deletes the PV only after its instance wrote back", func() {
		w := newWorld()
		sc := w.storageClass(del, immediate, map[string]string{params.DirtyHighWatermark: "90", params.DirtyLowWatermark: "80"})
		pvc := w.claim(sc, "64Mi", map[string]string{
			params.BackingPath: w.backing + "/run", params.RunAsUID: uid, params.RunAsGID: gid, params.SubPath: "out",
		})
		Expect(os.MkdirAll(w.hostPath(w.backing+"/run"), 0o755)).To(Succeed())
		Expect(os.Chown(w.hostPath(w.backing+"/run"), runAsUID, runAsGID)).To(Succeed())

		By("creating the instance and the PV as external-provisioner would")
		DeferCleanup(func() { GinkgoWriter.Println("claim events:", eventMessages(w.ns, pvc.Name)) })
		pv := volumeOf(pvc)
		Expect(pv.Annotations).To(HaveKeyWithValue(provisioner.AnnotationProvisionedBy, cachev1alpha1.DriverName))
		Expect(pv.Finalizers).To(ContainElement(provisioner.Finalizer))
		Expect(pv.Spec.PersistentVolumeReclaimPolicy).To(Equal(del))
		Expect(pv.Spec.MountOptions).To(Equal([]string{"noatime"}))
		Expect(pv.Spec.AccessModes).To(Equal(pvc.Spec.AccessModes))
		Expect(pv.Spec.Capacity.Storage().Cmp(resource.MustParse("64Mi"))).To(BeZero())
		Expect(pv.Spec.StorageClassName).To(Equal(sc.Name))
		Expect(pv.Spec.CSI.Driver).To(Equal(cachev1alpha1.DriverName))
		Expect(pv.Spec.CSI.VolumeHandle).To(Equal(volume.ID(w.ns, pv.Name)))
		Expect(pv.Spec.CSI.VolumeAttributes).To(Equal(map[string]string{volume.ContextSubPath: "out"}))
		Expect(pv.Spec.CSI.NodeStageSecretRef).To(Equal(&corev1.SecretReference{Name: cachev1alpha1.DataSecretName(pv.Name), Namespace: w.ns}))
		inst := get(instanceOf(pv))(Default)
		Expect(inst.Spec.Backing.Path).To(BeEquivalentTo(w.backing + "/run"))
		Expect(inst.Spec.Capacity.Cmp(resource.MustParse("64Mi"))).To(BeZero())
		Expect(inst.Spec.Pool).To(Equal(w.pool.Name))
		Expect(inst.Spec.WriteBack.DirtyHighWatermark).To(HaveValue(BeEquivalentTo(90)))
		bind(pvc, pv)
		if kcm {
			cur := &corev1.PersistentVolumeClaim{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pvc), cur)).To(Succeed())
			Expect(cur.Annotations).To(HaveKeyWithValue(provisioner.AnnotationStorageProvisioner, cachev1alpha1.DriverName),
				"the real PV controller did not hand the claim to the driver")
		}

		By("serving data through the instance's real servers")
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		data := bytes.Repeat([]byte("dynamic!"), 64<<10)
		writeThroughMount(inst, addrs, "out/result.dat", data)
		Eventually(func(g Gomega) int64 { return get(inst)(g).Status.Usage.Dirty.Value() }, 20*time.Second, 200*time.Millisecond).
			Should(BeNumerically(">=", len(data)))

		By("deleting the claim while a node still has the volume staged: the instance waits, and so does the PV")
		lease := createMountLease(inst, "node-c", "")
		deleteClaim(pvc)
		Eventually(func(g Gomega) cachev1alpha1.Phase {
			cur := get(inst)(g)
			g.Expect(cur.DeletionTimestamp).NotTo(BeNil())
			return cur.Status.Phase
		}, 20*time.Second, 100*time.Millisecond).Should(Equal(cachev1alpha1.PhaseFlushing))
		Consistently(volumeGone(pv), 3*time.Second, 500*time.Millisecond).Should(BeFalse(), "the PV went before its instance")

		By("unstaging: the instance writes back and goes, then the PV")
		Expect(k8sClient.Delete(ctx, lease)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(w.hostPath(w.backing + "/run/out/result.dat"))).To(Equal(data))
		Eventually(volumeGone(pv), 20*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	It("waits for the selected node with WaitForFirstConsumer, and takes the namespace's one identity", func() {
		w := newWorld()
		Eventually(func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), w.pool)).To(Succeed())
			r := &w.pool.Spec.BackingFilesystems[0].AccessRules[0]
			r.UIDRanges = []cachev1alpha1.IDRange{{Min: runAsUID, Max: runAsUID}}
			r.GIDRanges = []cachev1alpha1.IDRange{{Min: runAsGID, Max: runAsGID}}
			return k8sClient.Update(ctx, w.pool)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		sc := w.storageClass(del, wffc, map[string]string{params.BackingPath: w.backing})
		pvc := w.claim(sc, "64Mi", nil)
		consumer := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "consumer", Namespace: w.ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "job", Image: "job"}}, Volumes: []corev1.Volume{{
				Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}},
			}}},
		}
		Expect(k8sClient.Create(ctx, consumer)).To(Succeed())
		Expect(consumer.Spec.SchedulingGates).To(BeEmpty(), "a WaitForFirstConsumer pod was gated: it would wait for ever")
		noVolume(pvc, 2*time.Second)

		By("provisioning once the scheduler picked the consumer's node")
		Eventually(func() error {
			cur := &corev1.PersistentVolumeClaim{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pvc), cur)).To(Succeed())
			cur.Annotations = map[string]string{provisioner.AnnotationSelectedNode: "node-b"}
			return k8sClient.Update(ctx, cur)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		pv := volumeOf(pvc)
		inst := get(instanceOf(pv))(Default)
		Expect(inst.Spec.RunAs).To(Equal(cachev1alpha1.RunAs{UID: runAsUID, GID: runAsGID}))
		bind(pvc, pv)
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		Expect(k8sClient.Delete(ctx, consumer)).To(Succeed())
		deleteClaim(pvc)
		Eventually(volumeGone(pv), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(gone(inst)()).To(BeTrue())
	})

	It("keeps the instance of a PV deleted while its claim is bound, until the claim goes", func() {
		w := newWorld()
		sc := w.storageClass(del, immediate, map[string]string{params.BackingPath: "$BACKING", params.RunAsUID: uid, params.RunAsGID: gid})
		pvc := w.claim(sc, "64Mi", nil)
		pv := volumeOf(pvc)
		inst := get(instanceOf(pv))(Default)
		bind(pvc, pv)
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		Expect(k8sClient.Delete(ctx, pv)).To(Succeed())
		Consistently(func(g Gomega) *metav1.Time { return get(inst)(g).DeletionTimestamp }, 3*time.Second, 500*time.Millisecond).
			Should(BeNil(), "the volume of a bound claim was deleted")
		deleteClaim(pvc)
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Eventually(volumeGone(pv), 20*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	It("keeps the instance and the PV of a Retain class when the claim goes", func() {
		w := newWorld()
		sc := w.storageClass(retain, immediate, map[string]string{params.BackingPath: w.backing, params.RunAsUID: uid, params.RunAsGID: gid})
		pvc := w.claim(sc, "64Mi", nil)
		pv := volumeOf(pvc)
		Expect(pv.Finalizers).NotTo(ContainElement(provisioner.Finalizer))
		inst := instanceOf(pv)
		bind(pvc, pv)
		deleteClaim(pvc)
		Consistently(func(g Gomega) {
			g.Expect(get(inst)(g).DeletionTimestamp).To(BeNil())
			g.Expect(volumeGone(pv)()).To(BeFalse())
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())
		Expect(k8sClient.Delete(ctx, pv)).To(Succeed())
		Eventually(volumeGone(pv), 10*time.Second, 200*time.Millisecond).Should(BeTrue())
		Consistently(func(g Gomega) *metav1.Time { return get(inst)(g).DeletionTimestamp }, 3*time.Second, 500*time.Millisecond).
			Should(BeNil(), "deleting a Retain PV deleted its instance")
	})

	It("mounts an existing instance by name and never deletes it", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		named := w.storageClass(del, immediate, map[string]string{params.Instance: inst.Name})
		pvc := w.claim(named, "1Mi", map[string]string{params.SubPath: "shared"})
		pv := volumeOf(pvc)
		Expect(pv.Spec.CSI.VolumeHandle).To(Equal(volume.ID(w.ns, inst.Name)))
		Expect(pv.Spec.CSI.NodeStageSecretRef.Name).To(Equal(cachev1alpha1.DataSecretName(inst.Name)))
		bind(pvc, pv)

		By("deleting the claim: the PV goes, the instance stays")
		deleteClaim(pvc)
		Eventually(volumeGone(pv), 20*time.Second, 200*time.Millisecond).Should(BeTrue())
		Consistently(func(g Gomega) *metav1.Time { return get(inst)(g).DeletionTimestamp }, 2*time.Second, 500*time.Millisecond).Should(BeNil())
	})

	It("provisions the claim of a generic ephemeral volume, owned by its pod, and gates the pod", func() {
		w := newWorld()
		sc := w.storageClass(del, immediate, map[string]string{params.BackingPath: w.backing, params.RunAsUID: uid, params.RunAsGID: gid})
		tmpl := w.claimObject(sc, "64Mi", nil)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: w.ns},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "job", Image: "job"}},
				Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
					VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: tmpl.Spec},
				}}}},
			},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: cachev1alpha1.SchedulingGate}))

		By("having the pod's claim, owned by the pod, from the ephemeral volume controller")
		pvc := ephemeralClaim(pod, "scratch", tmpl)
		pv := volumeOf(pvc)
		inst := get(instanceOf(pv))(Default)
		bind(pvc, pv)

		By("letting the pod go once its instance is Ready")
		kl.RunServers(ctx, inst, 1)
		Eventually(func(g Gomega) []corev1.PodSchedulingGate {
			cur := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), cur)).To(Succeed())
			return cur.Spec.SchedulingGates
		}, 20*time.Second, 200*time.Millisecond).Should(BeEmpty())
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		deleteClaim(pvc)
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Eventually(volumeGone(pv), 20*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	It("deletes the instance of a Delete volume whose claim went before its PV was made", func() {
		w := newWorld()
		// A claim the provisioner does not serve, so that no PV is made, as
		// if the provisioner stopped between creating the instance and the PV.
		other := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "other-"}, Provisioner: "example.com/other"}
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, other)).To(Succeed()) })
		pvc := w.claim(other, "64Mi", nil)
		p, err := params.Parse(map[string]string{params.Pool: w.pool.Name, params.BackingPath: w.backing, params.RunAsUID: uid, params.RunAsGID: gid}, nil)
		Expect(err).NotTo(HaveOccurred())
		vol, err := (&instances.Instances{Client: k8sClient}).Create(ctx, instances.Request{
			Name: "pvc-" + string(pvc.UID), Namespace: w.ns, Claim: pvc.Name, Capacity: resourceOf("64Mi"), Params: p, ReclaimPolicy: string(del),
		})
		Expect(err).NotTo(HaveOccurred())
		inst := get(&cachev1alpha1.CacheInstance{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "pvc-" + string(pvc.UID)}})(Default)
		Expect(vol.ID).To(Equal(volume.ID(w.ns, inst.Name)))
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		Consistently(func(g Gomega) *metav1.Time { return get(inst)(g).DeletionTimestamp }, 2*time.Second, 500*time.Millisecond).
			Should(BeNil(), "the instance of a live claim was deleted")

		deleteClaim(pvc)
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	})

	DescribeTable("refuses bad input with a Warning Event on the claim, and no PV",
		func(scKeys, pvcKeys map[string]string, size, want string) {
			w := newWorld()
			other := newWorld()
			foreign := other.instance("64Mi")
			foreign.Name, foreign.GenerateName = "foreign", ""
			Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
			sc := w.storageClass(del, immediate, scKeys)
			pvc := w.claim(sc, size, pvcKeys)
			Eventually(func() []string { return eventMessages(w.ns, pvc.Name) }, 20*time.Second, 200*time.Millisecond).
				Should(ContainElement(And(HavePrefix(provisioner.ReasonProvisioningFailed+": "), ContainSubstring(want))))
			noVolume(pvc, time.Second)
			Expect(gone(&cachev1alpha1.CacheInstance{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "pvc-" + string(pvc.UID)}})()).
				To(BeTrue(), "an instance was made for bad input")
		},
		Entry("an unknown parameter", map[string]string{"backingpath": "/lus"}, nil, "64Mi", `unknown StorageClass parameter "backingpath"`),
		Entry("an unknown annotation", nil, map[string]string{"capacity": "1Ti"}, "64Mi", "unknown PVC annotation"),
		Entry("a missing backing path", nil, nil, "64Mi", "missing backingPath"),
		Entry("capacity beyond the pool", map[string]string{params.BackingPath: "$BACKING", params.RunAsUID: "1500", params.RunAsGID: "1500"}, nil, "1Gi", "spec.capacity"),
		Entry("a path the pool does not grant", map[string]string{params.BackingPath: mountAt + "/etc", params.RunAsUID: "1500", params.RunAsGID: "1500"}, nil, "64Mi", "PathNotAllowed"),
		Entry("an identity outside the mapping", nil, map[string]string{params.BackingPath: "$BACKING", params.RunAsUID: "0", params.RunAsGID: "0"}, "64Mi", "IdentityNotAllowed"),
		Entry("no identity where the pool maps many", map[string]string{params.BackingPath: "$BACKING"}, nil, "64Mi", "set runAsUID and runAsGID"),
		Entry("an unknown instance", nil, map[string]string{params.Instance: "nonexistent"}, "1Mi", "does not exist"),
		Entry("an instance of another namespace", nil, map[string]string{params.Instance: "foreign"}, "1Mi", "does not exist in namespace"),
		Entry("an instance named with its namespace", nil, map[string]string{params.Instance: "other/foreign"}, "1Mi", "another namespace"),
	)
})
