package kubelet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:staticcheck // a Ginkgo helper, written as the suites that use it
	. "github.com/onsi/gomega"    //nolint:staticcheck // a Ginkgo helper, written as the suites that use it
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Kubelet runs the server pods of the API server Client talks to.
type Kubelet struct {
	// Root holds the processes' ready files and projected secrets.
	Root string
	// Bin is the burstcache binary the processes run.
	Bin    string
	Client client.Client

	mu     sync.Mutex
	procs  map[string]*serverProc
	lastIP int
	// extraArgs are added to the server processes, by namespace.
	extraArgs map[string][]string
	// impostors are the control addresses, by pod, where something other
	// than the pod's server answers (Impersonate).
	impostors map[string]string
}

type serverProc struct {
	cmd           *exec.Cmd
	ip            string
	data, control string
	log           *bytes.Buffer
	done          chan struct{}
}

// New returns a Kubelet keeping its files below root, which it opens to the
// pods' users.
func New(root, bin string, c client.Client) *Kubelet {
	GinkgoHelper()
	// Server processes run as the pods' users and must reach their volumes.
	Expect(os.Chmod(root, 0o755)).To(Succeed())
	Expect(os.Mkdir(filepath.Join(root, "ready"), 0o777)).To(Succeed())
	Expect(os.Chmod(filepath.Join(root, "ready"), 0o1777)).To(Succeed())
	return &Kubelet{Root: root, Bin: bin, Client: c, procs: map[string]*serverProc{}, extraArgs: map[string][]string{}, impostors: map[string]string{}}
}

// SetServerArgs adds args to the command line of the server processes
// started from now on for the pods of namespace, such as a hidden flag that
// slows the backing store down.
func (k *Kubelet) SetServerArgs(namespace string, args ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.extraArgs[namespace] = args
}

func (k *Kubelet) serverArgs(namespace string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.extraArgs[namespace]
}

// PodKey names a pod as the Kubelet's methods do: <namespace>/<name>.
func PodKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// Resolve is the reconciler's Resolver: the control address of the process
// that runs the pod.
func (k *Kubelet) Resolve(_ context.Context, pod *corev1.Pod) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if addr, ok := k.impostors[PodKey(pod)]; ok {
		return addr, nil
	}
	p := k.procs[PodKey(pod)]
	if p == nil {
		return "", fmt.Errorf("no process runs pod %s", PodKey(pod))
	}
	return p.control, nil
}

// Running reports whether a process runs the pod named by key.
func (k *Kubelet) Running(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.procs[key] != nil
}

// RunServers starts every server pod of the instance that does not run yet
// and returns the data addresses in server index order.
func (k *Kubelet) RunServers(ctx context.Context, inst *cachev1alpha1.CacheInstance, n int) []string {
	GinkgoHelper()
	var pods corev1.PodList
	Eventually(func(g Gomega) {
		pods = corev1.PodList{}
		g.Expect(k.Client.List(ctx, &pods, client.InNamespace(inst.Namespace), client.MatchingLabels{
			cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
		})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(n))
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	addrs := make([]string, n)
	for i := range pods.Items {
		pod := &pods.Items[i]
		p := k.Start(ctx, pod)
		Expect(p).NotTo(BeEmpty(), "a Secret that pod %s mounts is missing", PodKey(pod))
		addrs[IndexOf(pod)] = p
	}
	return addrs
}

// Start runs the pod, if no process runs it yet, and returns its data
// address; or "" while a Secret it mounts is missing, as for a pod whose
// instance was deleted just after it was made (Run tries again).
func (k *Kubelet) Start(ctx context.Context, pod *corev1.Pod) string {
	GinkgoHelper()
	k.mu.Lock()
	p := k.procs[PodKey(pod)]
	k.mu.Unlock()
	if p != nil {
		return p.data
	}
	k.runInit(ctx, pod)
	if !k.projectSecrets(ctx, pod) {
		return ""
	}
	p = k.runServer(pod)
	k.mu.Lock()
	k.procs[PodKey(pod)] = p
	k.mu.Unlock()
	k.setPodRunning(ctx, pod, p.ip)
	return p.data
}

// Stop ends the process of a pod, as a node losing it would.
func (k *Kubelet) Stop(key string) {
	k.mu.Lock()
	p := k.procs[key]
	delete(k.procs, key)
	k.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Impersonate ends the process of the pod named by key and serves h at the
// control address that process had, as a process that took the address of
// a dead server would, until the returned function is called. The pod
// stays Ready, so the operator goes on calling that address.
func (k *Kubelet) Impersonate(key string, h http.Handler) (stop func()) {
	GinkgoHelper()
	k.mu.Lock()
	p := k.procs[key]
	k.mu.Unlock()
	Expect(p).NotTo(BeNil(), "no process runs pod %s", key)
	k.Stop(key)
	lis, err := net.Listen("tcp", p.control)
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	k.mu.Lock()
	k.impostors[key] = p.control
	k.mu.Unlock()
	return func() {
		_ = srv.Close()
		k.mu.Lock()
		delete(k.impostors, key)
		k.mu.Unlock()
	}
}

// StopAll ends every process.
func (k *Kubelet) StopAll() {
	for _, key := range k.keys() {
		k.Stop(key)
	}
}

func (k *Kubelet) keys() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var keys []string
	for key := range k.procs {
		keys = append(keys, key)
	}
	return keys
}

// Done is closed when the process that runs the pod named by key exits; it
// is nil when none runs it.
func (k *Kubelet) Done(key string) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.procs[key]; p != nil {
		return p.done
	}
	return nil
}

// IndexOf is the index of a server pod in its instance.
func IndexOf(pod *corev1.Pod) int {
	GinkgoHelper()
	i, err := strconv.Atoi(pod.Labels[cachev1alpha1.LabelServerIndex])
	Expect(err).NotTo(HaveOccurred())
	return i
}
