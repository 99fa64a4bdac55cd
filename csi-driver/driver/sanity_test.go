package driver_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/burstcache/burstcache/csi-driver/driver"
	"github.com/burstcache/burstcache/csi-driver/mounter"
)

// stageSecrets hands csi-sanity's stage calls the instance's data secret.
const stageSecrets = "NodeStageVolumeSecret:\n  secret: " + secret + "\n"

// sanityConfig is filled in when the node plugin under test has started:
// csi-sanity reads it as its specs run.
var sanityConfig = sanity.NewTestConfig()

// csi-sanity runs here against the identity and node services, with real
// mounts of the suite's instance. The controller service lives in another
// package and is not served here: a stand-in takes its place, because
// csi-sanity always asks a driver for controller capabilities and makes its
// node-side volumes with CreateVolume. The stand-in announces no volume
// capability, so csi-sanity's controller specs skip, and every volume it
// "creates" is the suite's instance.
var _ = Describe("csi-sanity, node plugin alone", Ordered, ContinueOnFailure, func() {
	BeforeAll(func() {
		w := newWorld()
		p := startPluginLogging(w, &mounter.Process{Binary: bin}, time.Hour, GinkgoLogr,
			func(o *driver.Options) { o.Controller = noController{} })
		dir := GinkgoT().TempDir()
		// csi-sanity's Connect misses a connection that is ready before it
		// first looks (it then waits a minute for a change that never
		// comes). A passthrough address with a dialer that waits a moment
		// keeps the connection from being ready that soon.
		sanityConfig.Address = "passthrough:///" + p.sock
		sanityConfig.DialOptions = []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				time.Sleep(100 * time.Millisecond)
				return (&net.Dialer{}).DialContext(ctx, "unix", addr)
			}),
		}
		sanityConfig.TargetPath = filepath.Join(dir, "target")
		sanityConfig.StagingPath = filepath.Join(dir, "staging")
		sanityConfig.IDGen = &idGen{}
		sanityConfig.SecretsFile = filepath.Join(dir, "secrets.yaml")
		Expect(os.WriteFile(sanityConfig.SecretsFile, []byte(stageSecrets), 0o600)).To(Succeed())
	})
	sanity.GinkgoTest(&sanityConfig)
})

// noController is a controller service that creates no volumes. It
// announces only SINGLE_NODE_MULTI_WRITER, which asks for no RPC, because
// csi-sanity wants a non-empty list.
type noController struct {
	csi.UnimplementedControllerServer
}

func (noController) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		}},
	}}}, nil
}

// CreateVolume hands out the suite's instance, whatever is asked.
func (noController) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId: namespace + "/" + instName, CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
	}}, nil
}

// DeleteVolume deletes nothing: the suite's instance outlives csi-sanity.
func (noController) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms mount capabilities of the suite's
// instance.
func (noController) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	switch {
	case req.GetVolumeId() == "" || len(req.GetVolumeCapabilities()) == 0:
		return nil, status.Error(codes.InvalidArgument, "volume ID and capabilities are required")
	case req.GetVolumeId() != namespace+"/"+instName:
		return nil, status.Error(codes.NotFound, "no such volume")
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(),
	}}, nil
}

// idGen makes volume IDs of the driver's form, <namespace>/<instance>, that
// name no instance.
type idGen struct{ n atomic.Int64 }

func (g *idGen) GenerateUniqueValidVolumeID() string {
	return fmt.Sprintf("%s/sanity-%d", namespace, g.n.Add(1))
}
func (g *idGen) GenerateInvalidVolumeID() string { return "not-a-volume" }
func (g *idGen) GenerateUniqueValidNodeID() string {
	return fmt.Sprintf("node-%d", g.n.Add(1))
}
func (g *idGen) GenerateInvalidNodeID() string { return "not a node" }
