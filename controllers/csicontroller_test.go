package controllers_test

import (
	"context"

	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/controller"
	"github.com/burstcache/burstcache/csi-driver/params"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

var _ = Describe("CSI controller service", func() {
	mount := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}}
	code := status.Code

	It("creates and deletes volumes idempotently, the way the external-provisioner calls it", func() {
		w := newWorld()
		srv := controller.NewControllerServer(k8sClient)
		// The claim's class is the sidecar's: the in-process provisioner
		// does not know it and leaves the claim alone.
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "sidecar", Namespace: w.ns, Annotations: map[string]string{
				params.AnnotationPrefix + params.BackingPath: w.backing, params.AnnotationPrefix + params.SubPath: "out",
			}},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: ptr("burstcache-sidecar"), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceOf("64Mi")}},
			},
		}
		Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
		request := func(name string, size int64, extra ...string) *csi.CreateVolumeRequest {
			p := map[string]string{
				params.Pool: w.pool.Name, params.RunAsUID: strconv.Itoa(runAsUID), params.RunAsGID: strconv.Itoa(runAsGID),
				"csi.storage.k8s.io/pvc/name": pvc.Name, "csi.storage.k8s.io/pvc/namespace": w.ns, "csi.storage.k8s.io/pv/name": name,
			}
			for i := 0; i < len(extra); i += 2 {
				p[extra[i]] = extra[i+1]
			}
			return &csi.CreateVolumeRequest{Name: name, Parameters: p, VolumeCapabilities: mount, CapacityRange: &csi.CapacityRange{RequiredBytes: size}}
		}

		By("creating the instance, and answering a retry with the same volume")
		resp, err := srv.CreateVolume(ctx, request("pvc-side-1", 64<<20))
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Volume.VolumeId).To(Equal(volume.ID(w.ns, "pvc-side-1")))
		Expect(resp.Volume.CapacityBytes).To(BeEquivalentTo(64 << 20))
		Expect(resp.Volume.VolumeContext).To(Equal(map[string]string{volume.ContextSubPath: "out"}))
		inst := get(instanceOf(&corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{VolumeHandle: resp.Volume.VolumeId}}}}))(Default)
		Expect(inst.Spec.Backing.Path).To(BeEquivalentTo(w.backing))
		again, err := srv.CreateVolume(ctx, request("pvc-side-1", 64<<20))
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Volume).To(Equal(resp.Volume))

		By("refusing another request under the same name, and bad requests, with their codes")
		_, err = srv.CreateVolume(ctx, request("pvc-side-1", 128<<20))
		Expect(code(err)).To(Equal(codes.AlreadyExists), "%v", err)
		_, err = srv.CreateVolume(ctx, request("pvc-side-2", 1<<30))
		Expect(code(err)).To(Equal(codes.ResourceExhausted), "%v", err)
		_, err = srv.CreateVolume(ctx, request("pvc-side-3", 64<<20, "colour", "blue"))
		Expect(code(err)).To(Equal(codes.InvalidArgument), "%v", err)
		Expect(err).To(MatchError(ContainSubstring(`unknown StorageClass parameter "colour"`)))
		_, err = srv.CreateVolume(ctx, request("pvc-side-4", 1<<20, params.Instance, "missing", params.Pool, w.pool.Name))
		Expect(code(err)).To(Equal(codes.InvalidArgument), "runAs keys on a named volume: %v", err)
		named := &csi.CreateVolumeRequest{Name: "pvc-side-5", VolumeCapabilities: mount, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
			Parameters: map[string]string{params.Instance: "missing", "csi.storage.k8s.io/pvc/name": "another-claim", "csi.storage.k8s.io/pvc/namespace": w.ns}}
		_, err = srv.CreateVolume(ctx, named)
		Expect(code(err)).To(Equal(codes.NotFound), "%v", err)
		noMeta := request("pvc-side-6", 64<<20)
		delete(noMeta.Parameters, "csi.storage.k8s.io/pvc/name")
		_, err = srv.CreateVolume(ctx, noMeta)
		Expect(code(err)).To(Equal(codes.InvalidArgument), "%v", err)
		block := request("pvc-side-7", 64<<20)
		block.VolumeCapabilities = []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: mount[0].AccessMode}}
		_, err = srv.CreateVolume(ctx, block)
		Expect(code(err)).To(Equal(codes.InvalidArgument), "%v", err)

		By("validating capabilities of existing volumes only")
		v, err := srv.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: resp.Volume.VolumeId, VolumeCapabilities: mount})
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Confirmed).NotTo(BeNil())
		_, err = srv.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: volume.ID(w.ns, "nope"), VolumeCapabilities: mount})
		Expect(code(err)).To(Equal(codes.NotFound), "%v", err)

		By("deleting: failing while the caller cannot wait, succeeding once the instance wrote back and went, every time")
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		short, cancelShort := context.WithTimeout(ctx, time.Millisecond)
		_, err = srv.DeleteVolume(short, &csi.DeleteVolumeRequest{VolumeId: resp.Volume.VolumeId})
		cancelShort()
		Expect(code(err)).To(BeElementOf(codes.Unavailable, codes.DeadlineExceeded), "%v", err)
		_, err = srv.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.Volume.VolumeId})
		Expect(err).NotTo(HaveOccurred())
		Expect(gone(inst)()).To(BeTrue(), "DeleteVolume succeeded before the instance wrote back and went")
		_, err = srv.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.Volume.VolumeId})
		Expect(err).NotTo(HaveOccurred())
		_, err = srv.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "not a volume"})
		Expect(err).NotTo(HaveOccurred())
	})

	It("never deletes the instance of a named volume", func() {
		w := newWorld()
		srv := controller.NewControllerServer(k8sClient)
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		resp, err := srv.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-named", VolumeCapabilities: mount,
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
			Parameters:    map[string]string{params.Instance: inst.Name, "csi.storage.k8s.io/pvc/name": "x", "csi.storage.k8s.io/pvc/namespace": w.ns}})
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Volume.VolumeId).To(Equal(volume.ID(w.ns, inst.Name)))
		_, err = srv.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.Volume.VolumeId})
		Expect(err).NotTo(HaveOccurred())
		Expect(get(inst)(Default).DeletionTimestamp).To(BeNil())
	})
})
