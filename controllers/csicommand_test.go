package controllers_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/params"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

var _ = Describe("burstcache csi controller", func() {
	It("serves the identity and controller services over its endpoint", func() {
		w := newWorld()
		user, err := testEnv.AddUser(envtest.User{Name: "csi-controller", Groups: []string{"system:masters"}}, cfg)
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600)).To(Succeed())
		sock := filepath.Join(dir, "csi.sock")
		cmd := exec.Command(bin, "csi", "controller", "--endpoint", "unix://"+sock)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"))
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() {
			Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Expect(cmd.Wait()).To(Succeed(), "%s", &log)
		})
		Eventually(func() error { _, err := os.Stat(sock); return err }, 20*time.Second, 100*time.Millisecond).Should(Succeed(), "%s", &log)
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)

		info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		Expect(err).NotTo(HaveOccurred())
		Expect(info.Name).To(Equal(cachev1alpha1.DriverName))
		ctl := csi.NewControllerClient(conn)
		caps, err := ctl.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
		Expect(err).NotTo(HaveOccurred())
		Expect(caps.Capabilities).To(ConsistOf(HaveField("Type", HaveField("Rpc.Type", csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME))))

		mount := []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		}}
		req := &csi.CreateVolumeRequest{Name: "pvc-wire", VolumeCapabilities: mount, CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20},
			Parameters: map[string]string{params.Pool: w.pool.Name, params.BackingPath: w.backing, params.RunAsUID: "1500", params.RunAsGID: "1500",
				"csi.storage.k8s.io/pvc/name": "wire", "csi.storage.k8s.io/pvc/namespace": w.ns}}
		resp, err := ctl.CreateVolume(ctx, req)
		Expect(err).NotTo(HaveOccurred(), "%s", &log)
		Expect(resp.Volume.VolumeId).To(Equal(volume.ID(w.ns, "pvc-wire")))
		req.Parameters["typo"] = "x"
		_, err = ctl.CreateVolume(ctx, req)
		Expect(status.Code(err)).To(Equal(codes.InvalidArgument), "%v", err)
	})
})
