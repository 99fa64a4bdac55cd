package sanity_test

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
	"google.golang.org/grpc/credentials/insecure"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/controller"
	"github.com/burstcache/burstcache/csi-driver/driver"
	"github.com/burstcache/burstcache/csi-driver/mounter"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

const (
	namespace = "sanity"
	poolName  = "sanity"
	nodeName  = "node-a"
	mountAt   = "/lus/global"
	backing   = mountAt + "/projects/sanity"
	runAsUID  = 1500
)

// sanityConfig is filled in once both plugins serve: csi-sanity reads it as
// its specs run.
var sanityConfig = sanity.NewTestConfig()

var _ = Describe("csi-sanity, controller and node plugins", Ordered, ContinueOnFailure, func() {
	BeforeAll(func() {
		pfs := createWorld()
		dir := GinkgoT().TempDir()
		ctrlSock := serveController(filepath.Join(dir, "controller.sock"))
		nodeSock := serveNode(filepath.Join(dir, "node.sock"), filepath.Join(dir, "state"))
		sanityConfig.ControllerAddress = "passthrough:///" + ctrlSock
		sanityConfig.ControllerDialOptions = dialOptions()
		sanityConfig.Address = "passthrough:///" + nodeSock
		sanityConfig.DialOptions = append(dialOptions(), grpc.WithUnaryInterceptor(stageSecrets))
		sanityConfig.TargetPath = filepath.Join(dir, "target")
		sanityConfig.StagingPath = filepath.Join(dir, "staging")
		sanityConfig.IDGen = &idGen{}
		sanityConfig.TestVolumeSize = 64 << 20
		// A StorageClass's parameters, and the claim's name and namespace
		// that the external-provisioner adds with --extra-create-metadata.
		// The claim does not exist: its annotations are simply empty.
		sanityConfig.TestVolumeParameters = map[string]string{
			"pool": poolName, "backingPath": backing, "runAsUID": "1500", "runAsGID": "1500",
			"csi.storage.k8s.io/pvc/name": "sanity-claim", "csi.storage.k8s.io/pvc/namespace": namespace,
		}
		GinkgoWriter.Println("The backing file system is", pfs)
		DeferCleanup(func() { expectNothingLeft(dir) })
	})
	sanity.GinkgoTest(&sanityConfig)
})

// expectNothingLeft checks that csi-sanity's deletions and unstages did
// everything: no instance, server pod or mount Lease is left, and no mount
// below the suite's directory.
func expectNothingLeft(dir string) {
	By("checking that nothing outlives csi-sanity")
	Eventually(func(g Gomega) {
		var insts cachev1alpha1.CacheInstanceList
		g.Expect(k8sClient.List(ctx, &insts, client.InNamespace(namespace))).To(Succeed())
		g.Expect(insts.Items).To(BeEmpty())
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
		var leases coordinationv1.LeaseList
		g.Expect(k8sClient.List(ctx, &leases, client.InNamespace(namespace))).To(Succeed())
		g.Expect(leases.Items).To(BeEmpty())
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	Expect(err).NotTo(HaveOccurred())
	Expect(string(mounts)).NotTo(ContainSubstring(dir), "a mount outlived csi-sanity")
}

// dialOptions dial a unix socket a moment late. csi-sanity's Connect misses
// a connection that is ready before it first looks (it then waits a minute
// for a change that never comes); a passthrough address with a dialer that
// waits keeps the connection from being ready that soon.
func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			time.Sleep(100 * time.Millisecond)
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
	}
}

// stageSecrets does kubelet's part for NodeStageVolume: it hands the node
// plugin the data Secret of the volume's instance, which a StorageClass's
// node-stage-secret templates name, as the call's secrets. Calls for
// volumes with no such Secret go as csi-sanity made them.
func stageSecrets(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*csi.NodeStageVolumeRequest); ok {
		if ns, name, err := volume.ParseID(r.GetVolumeId()); err == nil {
			r.Secrets = dataSecret(ctx, ns, name)
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// dataSecret returns the data of the instance's Secret. The operator
// creates it as it starts the instance's servers: while the instance
// exists, it waits for the Secret, as kubelet retries a stage whose secret
// it cannot read.
func dataSecret(ctx context.Context, ns, name string) map[string]string {
	sec := &corev1.Secret{}
	Eventually(func() error {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: cachev1alpha1.DataSecretName(name)}, sec)
		if apierrors.IsNotFound(err) {
			if k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cachev1alpha1.CacheInstance{}) != nil {
				return nil
			}
		}
		return err
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	out := map[string]string{}
	for k, v := range sec.Data {
		out[k] = string(v)
	}
	return out
}

// serveController serves the identity and controller services as
// `burstcache csi controller` does.
func serveController(sock string) string {
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, controller.NewIdentityServer("sanity"))
	csi.RegisterControllerServer(srv, controller.NewControllerServer(k8sClient))
	lis, err := net.Listen("unix", sock)
	Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve(lis) }()
	DeferCleanup(srv.Stop)
	return sock
}

// serveNode serves the identity and node services as `burstcache csi node
// --mounter process --controller-service` does.
func serveNode(sock, stateDir string) string {
	d, err := driver.New(driver.Options{
		NodeName: nodeName, StateDir: stateDir, Client: k8sClient, Logger: GinkgoLogr,
		Mounter: &mounter.Process{Binary: bin}, MountTimeout: 20 * time.Second, StopTimeout: 30 * time.Second,
		// As --controller-service: csi-sanity asks the node socket whether
		// the plugin has a controller service before its lifecycle specs.
		AnnounceController: true,
	})
	Expect(err).NotTo(HaveOccurred())
	lis, err := driver.Listen("unix://" + sock)
	Expect(err).NotTo(HaveOccurred())
	sctx, scancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Serve(sctx, lis) }()
	DeferCleanup(func() { scancel(); Expect(<-done).To(Succeed()) })
	return sock
}

// createWorld creates the namespace, a pool of the suite's nodes that maps
// the namespace's project directory to runAsUID, and that directory, owned
// by runAsUID. It returns the host directory behind mountAt.
func createWorld() string {
	pfs := filepath.Join(kl.Root, "pfs")
	dir := filepath.Join(pfs, "projects", "sanity")
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.Chown(dir, runAsUID, runAsUID)).To(Succeed())
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
	pool := &cachev1alpha1.CachePool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec: cachev1alpha1.CachePoolSpec{
			Nodes: &cachev1alpha1.NodePlacement{NodeSelector: map[string]string{"node.burstcache.io/nvme": "true"}},
			Media: cachev1alpha1.CacheMedia{
				HostPath:        &cachev1alpha1.HostPathSource{Path: cachev1alpha1.AbsolutePath(filepath.Join(kl.Root, "nvme"))},
				CapacityPerNode: resource.MustParse("1Gi"),
			},
			AllocationGranularity: resource.MustParse("64Mi"),
			BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "pfs", MountPath: mountAt,
				HostPath: &cachev1alpha1.HostPathSource{Path: cachev1alpha1.AbsolutePath(pfs)},
				AccessRules: []cachev1alpha1.AccessRule{{
					Namespaces:   []string{namespace},
					PathPrefixes: []cachev1alpha1.AbsolutePath{backing},
					UIDRanges:    []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}},
					GIDRanges:    []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}},
				}},
			}},
		},
	}
	Expect(k8sClient.Create(ctx, pool)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.Nodes).To(HaveLen(3), "%+v", pool.Status)
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	return pfs
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
