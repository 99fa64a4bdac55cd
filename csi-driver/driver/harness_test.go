package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/csi-driver/driver"
	"github.com/burstcache/burstcache/csi-driver/mounter"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// world is one node's directories: the plugin's state directory, the
// staging path and a place for targets, as kubelet lays them out.
type world struct {
	stateDir, staging, pods string
	// instance is the CacheInstance the world's volume names.
	instance string
}

func newWorld() *world {
	root := GinkgoT().TempDir()
	w := &world{
		instance: instName,
		stateDir: filepath.Join(root, "plugins", "csi.burstcache.io", "state"),
		staging:  filepath.Join(root, "plugins", "kubernetes.io", "csi", "csi.burstcache.io", "abc", "globalmount"),
		pods:     filepath.Join(root, "pods"),
	}
	// Whatever a spec leaves behind, no mount or daemon outlives it.
	DeferCleanup(w.cleanup)
	return w
}

// target returns the target path of a pod's volume.
func (w *world) target(pod string) string {
	return filepath.Join(w.pods, pod, "volumes", "kubernetes.io~csi", "pvc-1", "mount")
}

// volumeDir is the state directory of the instance's volume.
func (w *world) volumeDir() string {
	return filepath.Join(w.stateDir, "volumes", namespace+"_"+w.instance)
}

// id is the CSI volume ID of the world's instance.
func (w *world) id() string { return namespace + "/" + w.instance }

// daemonPID returns the pid of the volume's FUSE daemon.
func (w *world) daemonPID() int {
	b, err := os.ReadFile(filepath.Join(w.volumeDir(), "ready.json"))
	Expect(err).NotTo(HaveOccurred())
	var info struct{ PID int }
	Expect(json.Unmarshal(b, &info)).To(Succeed())
	return info.PID
}

// daemonArgs returns the command line of the volume's FUSE daemon.
func (w *world) daemonArgs() []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", w.daemonPID()))
	Expect(err).NotTo(HaveOccurred())
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// setClientCache turns spec.clientCache of the world's instance on or off.
func (w *world) setClientCache(on bool) {
	ci := &cachev1alpha1.CacheInstance{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: w.instance}, ci)).To(Succeed())
	ci.Spec.ClientCache = &cachev1alpha1.ClientCache{Enabled: on}
	Expect(k8sClient.Update(ctx, ci)).To(Succeed())
}

// mountLostEvents returns the notes of the MountLost events on the world's
// instance.
func (w *world) mountLostEvents() []string {
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(namespace))).To(Succeed())
	var notes []string
	for _, ev := range list.Items {
		if ev.Reason == cachev1alpha1.ReasonMountLost && ev.Regarding.Kind == "CacheInstance" && ev.Regarding.Name == w.instance {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

func (w *world) cleanup() {
	if _, err := os.Stat(filepath.Join(w.volumeDir(), "ready.json")); err == nil {
		_ = syscall.Kill(w.daemonPID(), syscall.SIGTERM)
	}
	entries, _ := filepath.Glob(filepath.Join(w.pods, "*", "volumes", "*", "*", "mount"))
	for _, dir := range append(entries, w.staging) {
		for range 8 {
			if syscall.Unmount(dir, syscall.MNT_DETACH) != nil {
				break
			}
		}
	}
	lease := &coordinationv1.Lease{}
	lease.Namespace, lease.Name = namespace, volume.MountLeaseName(w.instance, nodeName)
	_ = k8sClient.Delete(context.Background(), lease)
}

// plugin is a node plugin under test and a client of its socket.
type plugin struct {
	sock string
	node csi.NodeClient
	id   csi.IdentityClient
	stop func()
}

// startPlugin runs the driver in this process on a socket of its own.
func startPlugin(w *world, m mounter.Mounter, watch time.Duration) *plugin {
	return startPluginLogging(w, m, watch, GinkgoLogr)
}

// startPluginLogging is startPlugin with the plugin's logs going to log,
// and the options edited by edits.
func startPluginLogging(w *world, m mounter.Mounter, watch time.Duration, log logr.Logger, edits ...func(*driver.Options)) *plugin {
	opts := driver.Options{
		NodeName: nodeName, StateDir: w.stateDir, Client: k8sClient, Mounter: m, Logger: log,
		WatchInterval: watch, MountTimeout: 20 * time.Second, StopTimeout: 30 * time.Second,
	}
	for _, edit := range edits {
		edit(&opts)
	}
	d, err := driver.New(opts)
	Expect(err).NotTo(HaveOccurred())
	sock := filepath.Join(GinkgoT().TempDir(), "csi.sock")
	lis, err := driver.Listen("unix://" + sock)
	Expect(err).NotTo(HaveOccurred())
	sctx, scancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Serve(sctx, lis) }()
	p := dial(sock)
	conn := p.stop
	p.stop = func() {
		scancel()
		Expect(<-done).To(Succeed())
		conn()
	}
	DeferCleanup(func() {
		if sctx.Err() == nil {
			p.stop()
		}
	})
	return p
}

// startPluginProcess runs `burstcache csi node --mounter process` as kubelet
// would find it, and returns the plugin and its process.
func startPluginProcess(w *world, sock string) (*plugin, *exec.Cmd) {
	cmd := exec.Command(bin, "csi", "node", "--mounter", "process", "--burstcache-bin", bin,
		"--registration-dir=", "--endpoint", "unix://"+sock, "--state-dir", w.stateDir, "--node-name", nodeName)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return dial(sock), cmd
}

func dial(sock string) *plugin {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	Expect(err).NotTo(HaveOccurred())
	p := &plugin{sock: sock, node: csi.NewNodeClient(conn), id: csi.NewIdentityClient(conn), stop: func() { _ = conn.Close() }}
	Eventually(func() error {
		_, err := p.id.Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		return err
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	return p
}

func mountCapability(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func stageReq(w *world) *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{
		VolumeId: w.id(), StagingTargetPath: w.staging,
		VolumeCapability: mountCapability(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER),
		Secrets:          map[string]string{cachev1alpha1.DataSecretKey: secret},
	}
}

func publishReq(w *world, pod string, ctxKV ...string) *csi.NodePublishVolumeRequest {
	vc := map[string]string{"csi.storage.k8s.io/pod.name": pod}
	for i := 0; i+1 < len(ctxKV); i += 2 {
		vc[ctxKV[i]] = ctxKV[i+1]
	}
	return &csi.NodePublishVolumeRequest{
		VolumeId: w.id(), StagingTargetPath: w.staging, TargetPath: w.target(pod),
		VolumeCapability: mountCapability(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER),
		VolumeContext:    vc,
	}
}

func unpublishReq(w *world, pod string) *csi.NodeUnpublishVolumeRequest {
	return &csi.NodeUnpublishVolumeRequest{VolumeId: w.id(), TargetPath: w.target(pod)}
}

func unstageReq(w *world) *csi.NodeUnstageVolumeRequest {
	return &csi.NodeUnstageVolumeRequest{VolumeId: w.id(), StagingTargetPath: w.staging}
}

// codeOf returns the gRPC code of a call's error.
func codeOf(_ any, err error) codes.Code { return status.Code(err) }

// lease returns the node's mount Lease of the world's instance, or nil.
func (w *world) lease() *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: volume.MountLeaseName(w.instance, nodeName)}, l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return l
}

// leasePods returns the pods the Lease lists.
func (w *world) leasePods() string {
	l := w.lease()
	Expect(l).NotTo(BeNil(), "the mount Lease must exist while the volume is staged")
	Expect(l.Labels).To(HaveKeyWithValue(cachev1alpha1.LabelComponent, cachev1alpha1.ComponentMount))
	Expect(l.Labels).To(HaveKeyWithValue(cachev1alpha1.LabelInstance, w.instance))
	Expect(l.Spec.HolderIdentity).To(HaveValue(Equal(nodeName)))
	return l.Annotations[cachev1alpha1.AnnotationMountPods]
}

// flushServers writes back every dirty byte of every server.
func flushServers(servers []serverProc) {
	for i, s := range servers {
		to := control.Server{Addr: s.control, Index: i, Protocol: control.CurrentProtocol}
		_, err := control.NewClientFor(to, []byte(secret), nil).Flush(ctx)
		Expect(err).NotTo(HaveOccurred())
	}
}

// isMounted reports whether something is mounted on dir.
func isMounted(dir string) bool {
	ok, err := mounter.Mounted(dir)
	Expect(err).NotTo(HaveOccurred())
	return ok
}

// pattern returns n bytes that depend on seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

// gatedMounter holds each Start until the test sends a token on gate, so
// that a call is in flight while the test makes another. It reports each
// Start that begins on entered.
type gatedMounter struct {
	mounter.Mounter
	entered chan struct{}
	gate    chan struct{}
}

func newGatedMounter(m mounter.Mounter) *gatedMounter {
	return &gatedMounter{Mounter: m, entered: make(chan struct{}, 16), gate: make(chan struct{})}
}

func (g *gatedMounter) Start(ctx context.Context, s mounter.Spec) error {
	g.entered <- struct{}{}
	<-g.gate
	return g.Mounter.Start(ctx, s)
}

// samePods says whether the lease lists exactly these pods, in any order.
func samePods(got string, want ...string) bool {
	if got == "" {
		return len(want) == 0
	}
	parts := strings.Split(got, ",")
	if len(parts) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, p := range parts {
			found = found || p == w
		}
		if !found {
			return false
		}
	}
	return true
}
