package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/test/apiserver"
	"github.com/burstcache/burstcache/test/repo"
)

// The suite drives the node service through its gRPC socket, with real
// mounts: real `burstcache server` processes on loopback (two, striped, with
// a shared secret), a real FUSE mount per staged volume, and a real
// kube-apiserver and etcd (envtest) holding the CacheInstance and its pool.
// The operator does not run here: the suite writes the instance's status
// (Ready, and its servers' endpoints) itself, as the operator would.

const (
	nodeName  = "node-1"
	namespace = "team-a"
	instName  = "train"
	secret    = "s3cr3t-data-path"
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	k8sClient client.Client
	bin       string
	// kubeconfig is a kubeconfig file for plugin processes.
	kubeconfig string
	// backing is the directory the instance caches (the "PFS").
	backing string
	// servers are the instance's server processes.
	servers []serverProc
)

// serverProc is one running `burstcache server`.
type serverProc struct {
	cmd           *exec.Cmd
	data, control string
	// args start it again on the same addresses and cache directory.
	args []string
}

func TestDriver(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CSI node plugin Suite")
}

var _ = BeforeSuite(func() {
	if os.Geteuid() != 0 {
		Skip("mounting needs root")
	}
	Expect("/dev/fuse").To(BeAnExistingFile())
	ctx, cancel = context.WithCancel(context.Background())
	ctrl.SetLogger(GinkgoLogr)
	root, err := repo.Root()
	Expect(err).NotTo(HaveOccurred())
	bin = burstcacheBinary(root)
	startAPIServer()
	backing = GinkgoT().TempDir()
	servers = startServers(2, backing, GinkgoT().TempDir())
	createPool()
	createInstance(instName, servers)
})

var _ = AfterSuite(func() {
	for _, s := range servers {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	}
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startAPIServer starts kube-apiserver with the CRDs, and writes a
// kubeconfig for the plugin processes.
func startAPIServer() {
	env, cfg, err := apiserver.Start(apiserver.Options{CRDs: true})
	Expect(err).NotTo(HaveOccurred())
	testEnv = env
	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	user, err := testEnv.AddUser(envtest.User{Name: "csi-node", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
}

// startServers starts n servers of one striped instance over backing, with
// their cache directories in dir.
func startServers(n int, backing, dir string) []serverProc {
	secretFile := filepath.Join(dir, "secret")
	Expect(os.WriteFile(secretFile, []byte(secret), 0o600)).To(Succeed())
	var procs []serverProc
	for i := range n {
		procs = append(procs, startServer([]string{"server", "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0",
			"--backing", backing, "--cache-dir", filepath.Join(dir, fmt.Sprintf("server-%d", i)),
			"--capacity", "256Mi", "--extent-size", "1048576", "--index", strconv.Itoa(i), "--servers", strconv.Itoa(n),
			"--secret-file", secretFile}))
	}
	return procs
}

// startServer runs a server and waits until it serves.
func startServer(args []string) serverProc {
	ready := filepath.Join(GinkgoT().TempDir(), "ready.json")
	cmd := exec.Command(bin, append(args, "--ready-file", ready)...)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	var info struct{ Data, Control string }
	Eventually(func() error {
		b, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &info)
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	pinned := append([]string(nil), args...)
	pinned[2], pinned[4] = info.Data, info.Control
	return serverProc{cmd: cmd, data: info.Data, control: info.Control, args: pinned}
}

// createPool creates the pool and the namespace of the instances.
func createPool() {
	pool := &cachev1alpha1.CachePool{
		ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Spec: cachev1alpha1.CachePoolSpec{
			Media:                 cachev1alpha1.CacheMedia{HostPath: &cachev1alpha1.HostPathSource{Path: "/mnt/nvme"}, CapacityPerNode: resource.MustParse("100Gi")},
			AllocationGranularity: resource.MustParse("10Gi"),
			ExtentSize:            ptr(resource.MustParse("1Mi")),
			BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "lustre", MountPath: "/lus/global", HostPath: &cachev1alpha1.HostPathSource{Path: "/lus/global"},
				AccessRules: []cachev1alpha1.AccessRule{{Namespaces: []string{namespace},
					PathPrefixes: []cachev1alpha1.AbsolutePath{"/lus/global/team-a"},
					UIDRanges:    []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}}}},
			}},
		},
	}
	Expect(k8sClient.Create(ctx, pool)).To(Succeed())
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
}

// createInstance creates a Ready instance whose status lists the servers,
// as the operator would write it.
func createInstance(name string, servers []serverProc) {
	createInstanceAs(name, servers, cachev1alpha1.RunAs{UID: 1500, GID: 1500})
}

// createInstanceAs is createInstance of an instance that runs as id.
func createInstanceAs(name string, servers []serverProc, id cachev1alpha1.RunAs) {
	ci := &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: cachev1alpha1.CacheInstanceSpec{
			Pool: "fast", Capacity: resource.MustParse("20Gi"),
			Backing: &cachev1alpha1.BackingPath{Filesystem: "lustre", Path: "/lus/global/team-a/run"},
			RunAs:   id,
		},
	}
	Expect(k8sClient.Create(ctx, ci)).To(Succeed())
	ci.Status.Phase = cachev1alpha1.PhaseReady
	for i, s := range servers {
		ci.Status.Servers = append(ci.Status.Servers, cachev1alpha1.ServerStatus{
			Name: fmt.Sprintf("server-%d", i), Node: "ssd-" + strconv.Itoa(i), Endpoint: s.data,
		})
	}
	Expect(k8sClient.Status().Update(ctx, ci)).To(Succeed())
}

// burstcacheBinary returns $BURSTCACHE_BIN, or builds the binary.
func burstcacheBinary(root string) string {
	if b := os.Getenv("BURSTCACHE_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		Expect(err).NotTo(HaveOccurred())
		return abs
	}
	out := filepath.Join(GinkgoT().TempDir(), "burstcache")
	build := exec.Command("go", "build", "-o", out, "./cmd/burstcache")
	build.Dir = root
	b, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building burstcache: %s", b)
	return out
}

func ptr[T any](v T) *T { return &v }
