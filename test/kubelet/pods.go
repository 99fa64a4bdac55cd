package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:staticcheck // a Ginkgo helper, written as the suites that use it
	. "github.com/onsi/gomega"    //nolint:staticcheck // a Ginkgo helper, written as the suites that use it
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ready is what `burstcache server --ready-file` writes.
type ready struct {
	Data    string `json:"data"`
	Control string `json:"control"`
}

func (k *Kubelet) runInit(ctx context.Context, pod *corev1.Pod) {
	GinkgoHelper()
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectoryOrCreate {
			Expect(os.MkdirAll(v.HostPath.Path, 0o755)).To(Succeed())
		}
		if v.PersistentVolumeClaim != nil {
			k.attachClaim(ctx, pod, v.PersistentVolumeClaim.ClaimName)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		Expect(c.Command[0]).To(Equal("burstcache"))
		args := k.mapPaths(pod, c, append(c.Command[1:], c.Args...))
		out, err := exec.Command(k.Bin, args...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "init container %s: %s", c.Name, out)
	}
}

func (k *Kubelet) runServer(pod *corev1.Pod) *serverProc {
	GinkgoHelper()
	p, readyFile := k.launch(pod)
	var r ready
	Eventually(func() error {
		select {
		case <-p.done:
			StopTrying("server exited: " + p.log.String()).Now()
		default:
		}
		b, err := os.ReadFile(readyFile)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &r)
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	p.data, p.control = r.Data, r.Control
	return p
}

// RunFailing runs the pod's init containers and server as Start does, for
// a server expected to refuse to start, and returns its output once it
// exits. A server that serves instead fails the spec.
func (k *Kubelet) RunFailing(ctx context.Context, pod *corev1.Pod) string {
	GinkgoHelper()
	k.runInit(ctx, pod)
	Expect(k.projectSecrets(ctx, pod)).To(BeTrue(), "a Secret that pod %s mounts is missing", PodKey(pod))
	p, readyFile := k.launch(pod)
	Eventually(func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		if _, err := os.Stat(readyFile); err == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
			StopTrying("server started where it should have refused to: " + p.log.String()).Now()
		}
		return false
	}, 20*time.Second, 50*time.Millisecond).Should(BeTrue())
	return p.log.String()
}

// launch starts the server process of pod and returns it with the ready
// file it writes once it serves.
func (k *Kubelet) launch(pod *corev1.Pod) (*serverProc, string) {
	GinkgoHelper()
	c := pod.Spec.Containers[0]
	Expect(c.Command).To(Equal([]string{"burstcache", "server"}))
	readyFile := filepath.Join(k.Root, "ready", pod.Namespace+"-"+pod.Name)
	// A ready file left by the pod's predecessor must not be taken for this
	// server's.
	Expect(os.RemoveAll(readyFile)).To(Succeed())
	args := k.mapPaths(pod, c, append(c.Command[1:], c.Args...))
	// Each pod gets an address of its own on loopback, where it serves on
	// the ports of its spec, so that the endpoints the operator derives from
	// the pod's IP are the ones the process serves.
	port := listenPort(args)
	ip := k.podIP(port)
	args = append(args, "--listen="+net.JoinHostPort(ip, port), "--control="+net.JoinHostPort(ip, "0"), "--ready-file="+readyFile)
	args = append(args, k.serverArgs(pod.Namespace)...)
	cmd := exec.Command(k.Bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(pod.Spec.SecurityContext)}
	p := &serverProc{cmd: cmd, ip: ip, log: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	Expect(cmd.Start()).To(Succeed())
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, readyFile
}

// podIP returns a loopback address no pod of this Kubelet had yet, where
// nothing listens on port. Addresses start at a random point of 127/8, since
// other test processes on the machine run kubelets of their own.
func (k *Kubelet) podIP(port string) string {
	GinkgoHelper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lastIP == 0 {
		k.lastIP = 1 + rand.IntN(200<<16) //nolint:gosec // picks test addresses, not secrets
	}
	for range 100 {
		k.lastIP++
		n := 16<<16 + k.lastIP
		ip := fmt.Sprintf("127.%d.%d.%d", n>>16&0xff, n>>8&0xff, 1+(n&0xff)%254)
		if lis, err := net.Listen("tcp", net.JoinHostPort(ip, port)); err == nil {
			_ = lis.Close()
			return ip
		}
	}
	Fail("no free loopback address for a server pod")
	return ""
}

// listenPort is the port of the last --listen flag of args.
func listenPort(args []string) string {
	GinkgoHelper()
	port := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			_, p, err := net.SplitHostPort(v)
			Expect(err).NotTo(HaveOccurred())
			port = p
		}
	}
	Expect(port).NotTo(BeEmpty(), "the server container has no --listen flag")
	return port
}

// mapPaths replaces the container paths in flags by the host paths of the
// volumes mounted there; later flags win, so the caller's overrides apply.
func (k *Kubelet) mapPaths(pod *corev1.Pod, c corev1.Container, args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		name, val, ok := strings.Cut(a, "=")
		if ok && (name == "--backing" || name == "--backing-beneath" || name == "--cache-dir" || name == "--path" || name == "--secret-file") {
			a = name + "=" + k.hostPath(pod, c, val)
		}
		out = append(out, a)
	}
	return out
}

// hostPath maps a path in the container to the host path or secret volume
// behind it.
func (k *Kubelet) hostPath(pod *corev1.Pod, c corev1.Container, p string) string {
	GinkgoHelper()
	for _, m := range c.VolumeMounts {
		rest, ok := strings.CutPrefix(p, m.MountPath)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return v.HostPath.Path + rest
			}
			if v.Name == m.Name && v.PersistentVolumeClaim != nil {
				return k.ClaimDir(pod.Namespace, v.PersistentVolumeClaim.ClaimName) + rest
			}
			if v.Name == m.Name && v.Secret != nil {
				return k.secretDir(pod, v.Name) + rest
			}
		}
	}
	Fail(fmt.Sprintf("no host path, claim or secret volume holds %s in pod %s", p, pod.Name))
	return ""
}

// ClaimDir is the directory behind a claim. A claim volume is a directory
// per claim, which outlives the pod as a local PV does; there is no volume
// binding (no scheduler, no local volume provisioner), so it stands for the
// PV a WaitForFirstConsumer class would bind on the pod's node.
func (k *Kubelet) ClaimDir(ns, claim string) string {
	return filepath.Join(k.Root, "claims", ns, claim)
}

// attachClaim makes the claim's directory, as a local PV's. As the kubelet
// would, it refuses a claim that does not exist or is being deleted.
func (k *Kubelet) attachClaim(ctx context.Context, pod *corev1.Pod, claim string) {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{}
	Expect(k.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: claim}, pvc)).To(Succeed(), "claim of pod %s", pod.Name)
	Expect(pvc.DeletionTimestamp).To(BeNil(), "claim %s of pod %s is being deleted", claim, pod.Name)
	dir := k.ClaimDir(pod.Namespace, claim)
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.Chmod(filepath.Dir(dir), 0o755)).To(Succeed())
}

func (k *Kubelet) secretDir(pod *corev1.Pod, volume string) string {
	return filepath.Join(k.Root, "secrets", pod.Namespace, pod.Name, volume)
}

// projectSecrets writes the pod's secret volumes to files, with their items
// and modes, as the kubelet does on a tmpfs. A Secret that does not exist
// fails the test: the kubelet would not start the pod.
func (k *Kubelet) projectSecrets(ctx context.Context, pod *corev1.Pod) bool {
	GinkgoHelper()
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		sec := &corev1.Secret{}
		err := k.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.Secret.SecretName}, sec)
		if apierrors.IsNotFound(err) {
			// As a kubelet does, the pod waits for its Secret: the
			// instance that made both may be going already.
			return false
		}
		Expect(err).NotTo(HaveOccurred())
		dir := k.secretDir(pod, v.Name)
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755)).To(Succeed())
		for _, item := range v.Secret.Items {
			f := filepath.Join(dir, item.Path)
			Expect(os.WriteFile(f, sec.Data[item.Key], 0o600)).To(Succeed())
			Expect(os.Chmod(f, os.FileMode(*v.Secret.DefaultMode))).To(Succeed())
		}
	}
	return true
}

func credential(sc *corev1.PodSecurityContext) *syscall.Credential {
	cred := &syscall.Credential{Uid: uint32(*sc.RunAsUser), Gid: uint32(*sc.RunAsGroup)}
	for _, g := range sc.SupplementalGroups {
		cred.Groups = append(cred.Groups, uint32(g))
	}
	return cred
}

// setPodRunning reports the pod as the kubelet would once its readiness
// probe passed.
func (k *Kubelet) setPodRunning(ctx context.Context, pod *corev1.Pod, ip string) {
	GinkgoHelper()
	Eventually(func() error {
		cur := &corev1.Pod{}
		err := k.Client.Get(ctx, client.ObjectKeyFromObject(pod), cur)
		if apierrors.IsNotFound(err) {
			// Deleted while it started: Run stops its process.
			return nil
		}
		if err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP = ip
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		return k.Client.Status().Update(ctx, cur)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}
