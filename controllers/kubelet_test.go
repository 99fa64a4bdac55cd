package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// kubelet plays the part of the kubelets of the test's nodes for server
// pods: it runs the pod's init container and server container as real
// processes on loopback, with the pod's host path volumes mapped to real
// directories, as the pod's user, and reports the pod Running and Ready.
// A claim volume is a directory per claim, which outlives the pod as a
// local PV does; there is no volume binding (no scheduler, no local volume
// provisioner), so it stands for the PV a WaitForFirstConsumer class
// would bind on the pod's node.
type kubelet struct {
	root  string
	mu    sync.Mutex
	procs map[string]*serverProc
}

type serverProc struct {
	cmd           *exec.Cmd
	data, control string
	log           *bytes.Buffer
	done          chan struct{}
}

// ready is what `burstcache server --ready-file` writes.
type ready struct {
	Data    string `json:"data"`
	Control string `json:"control"`
}

func newKubelet(root string) *kubelet {
	// Server processes run as the pods' users and must reach their volumes.
	Expect(os.Chmod(root, 0o755)).To(Succeed())
	Expect(os.Mkdir(filepath.Join(root, "ready"), 0o777)).To(Succeed())
	Expect(os.Chmod(filepath.Join(root, "ready"), 0o1777)).To(Succeed())
	return &kubelet{root: root, procs: map[string]*serverProc{}}
}

func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// resolve is the reconciler's Resolver: the control address of the process
// that runs the pod.
func (k *kubelet) resolve(_ context.Context, pod *corev1.Pod) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.procs[podKey(pod)]
	if p == nil {
		return "", fmt.Errorf("no process runs pod %s", podKey(pod))
	}
	return p.control, nil
}

// runServers starts every server pod of the instance that does not run yet
// and returns the data addresses in server index order.
func (k *kubelet) runServers(inst *cachev1alpha1.CacheInstance, n int) []string {
	GinkgoHelper()
	var pods corev1.PodList
	Eventually(func(g Gomega) {
		pods = corev1.PodList{}
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(inst.Namespace), client.MatchingLabels{
			cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
		})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(n))
	}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	addrs := make([]string, n)
	for i := range pods.Items {
		pod := &pods.Items[i]
		p := k.start(pod)
		addrs[indexOf(pod)] = p.data
	}
	return addrs
}

func (k *kubelet) start(pod *corev1.Pod) *serverProc {
	GinkgoHelper()
	k.mu.Lock()
	p := k.procs[podKey(pod)]
	k.mu.Unlock()
	if p != nil {
		return p
	}
	k.runInit(pod)
	k.projectSecrets(pod)
	p = k.runServer(pod)
	k.mu.Lock()
	k.procs[podKey(pod)] = p
	k.mu.Unlock()
	setPodRunning(pod)
	return p
}

func (k *kubelet) runInit(pod *corev1.Pod) {
	GinkgoHelper()
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectoryOrCreate {
			Expect(os.MkdirAll(v.HostPath.Path, 0o755)).To(Succeed())
		}
		if v.PersistentVolumeClaim != nil {
			k.attachClaim(pod, v.PersistentVolumeClaim.ClaimName)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		Expect(c.Command[0]).To(Equal("burstcache"))
		args := k.mapPaths(pod, c, append(c.Command[1:], c.Args...))
		out, err := exec.Command(bin, args...).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "init container %s: %s", c.Name, out)
	}
}

func (k *kubelet) runServer(pod *corev1.Pod) *serverProc {
	GinkgoHelper()
	c := pod.Spec.Containers[0]
	Expect(c.Command).To(Equal([]string{"burstcache", "server"}))
	readyFile := filepath.Join(k.root, "ready", pod.Namespace+"-"+pod.Name)
	// A ready file left by the pod's predecessor must not be taken for this
	// server's.
	Expect(os.RemoveAll(readyFile)).To(Succeed())
	args := k.mapPaths(pod, c, append(c.Command[1:], c.Args...))
	args = append(args, "--listen=127.0.0.1:0", "--control=127.0.0.1:0", "--ready-file="+readyFile)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(pod.Spec.SecurityContext)}
	p := &serverProc{cmd: cmd, log: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	Expect(cmd.Start()).To(Succeed())
	go func() { _ = cmd.Wait(); close(p.done) }()
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

// mapPaths replaces the container paths in flags by the host paths of the
// volumes mounted there; later flags win, so the caller's overrides apply.
func (k *kubelet) mapPaths(pod *corev1.Pod, c corev1.Container, args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		name, val, ok := strings.Cut(a, "=")
		if ok && (name == "--backing" || name == "--cache-dir" || name == "--path" || name == "--secret-file") {
			a = name + "=" + k.hostPath(pod, c, val)
		}
		out = append(out, a)
	}
	return out
}

// hostPath maps a path in the container to the host path or secret volume
// behind it.
func (k *kubelet) hostPath(pod *corev1.Pod, c corev1.Container, p string) string {
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
				return k.claimDir(pod.Namespace, v.PersistentVolumeClaim.ClaimName) + rest
			}
			if v.Name == m.Name && v.Secret != nil {
				return k.secretDir(pod, v.Name) + rest
			}
		}
	}
	Fail(fmt.Sprintf("no host path, claim or secret volume holds %s in pod %s", p, pod.Name))
	return ""
}

// claimDir is the directory behind a claim.
func (k *kubelet) claimDir(ns, claim string) string {
	return filepath.Join(k.root, "claims", ns, claim)
}

// attachClaim makes the claim's directory, as a local PV's. As the kubelet
// would, it refuses a claim that does not exist or is being deleted.
func (k *kubelet) attachClaim(pod *corev1.Pod, claim string) {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: claim}, pvc)).To(Succeed(), "claim of pod %s", pod.Name)
	Expect(pvc.DeletionTimestamp).To(BeNil(), "claim %s of pod %s is being deleted", claim, pod.Name)
	dir := k.claimDir(pod.Namespace, claim)
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.Chmod(filepath.Dir(dir), 0o755)).To(Succeed())
}

func (k *kubelet) secretDir(pod *corev1.Pod, volume string) string {
	return filepath.Join(k.root, "secrets", pod.Namespace, pod.Name, volume)
}

// projectSecrets writes the pod's secret volumes to files, with their items
// and modes, as the kubelet does on a tmpfs. A Secret that does not exist
// fails the test: the kubelet would not start the pod.
func (k *kubelet) projectSecrets(pod *corev1.Pod) {
	GinkgoHelper()
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.Secret.SecretName}, sec)).To(Succeed())
		dir := k.secretDir(pod, v.Name)
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755)).To(Succeed())
		for _, item := range v.Secret.Items {
			f := filepath.Join(dir, item.Path)
			Expect(os.WriteFile(f, sec.Data[item.Key], 0o600)).To(Succeed())
			Expect(os.Chmod(f, os.FileMode(*v.Secret.DefaultMode))).To(Succeed())
		}
	}
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
func setPodRunning(pod *corev1.Pod) {
	GinkgoHelper()
	Eventually(func() error {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		cur.Status.Phase = corev1.PodRunning
		cur.Status.PodIP = "127.0.0.1"
		cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		return k8sClient.Status().Update(ctx, cur)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

// stop ends the process of a pod, as a node losing it would.
func (k *kubelet) stop(key string) {
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

func (k *kubelet) stopAll() {
	k.mu.Lock()
	var keys []string
	for key := range k.procs {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.stop(key)
	}
}

// dataSecretFile writes the instance's data secret to a file, as the CSI
// node plugin receives it, and returns the file's path.
func dataSecretFile(inst *cachev1alpha1.CacheInstance) string {
	GinkgoHelper()
	sec := &corev1.Secret{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: inst.Namespace, Name: cachev1alpha1.DataSecretName(inst.Name)}, sec)).To(Succeed())
	f := filepath.Join(GinkgoT().TempDir(), "secret")
	Expect(os.WriteFile(f, sec.Data[cachev1alpha1.DataSecretKey], 0o600)).To(Succeed())
	return f
}

// writeThroughMount mounts the instance's servers with a real FUSE mount,
// proving the instance's data secret, writes data to rel, and unmounts,
// which pushes the mount's data to the servers.
func writeThroughMount(inst *cachev1alpha1.CacheInstance, addrs []string, rel string, data []byte) {
	GinkgoHelper()
	mp := filepath.Join(GinkgoT().TempDir(), "mnt")
	Expect(os.Mkdir(mp, 0o755)).To(Succeed())
	readyFile := mp + ".ready"
	cmd := exec.Command(bin, "mount", "--servers", strings.Join(addrs, ","), "--secret-file", dataSecretFile(inst),
		"--ready-file", readyFile, mp)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	Expect(cmd.Start()).To(Succeed())
	Eventually(func() error { _, err := os.Stat(readyFile); return err }, 20*time.Second, 50*time.Millisecond).
		Should(Succeed(), "mount did not start: %s", &log)
	full := filepath.Join(mp, rel)
	Expect(os.MkdirAll(filepath.Dir(full), 0o755)).To(Succeed())
	Expect(os.WriteFile(full, data, 0o644)).To(Succeed(), "mount log: %s", &log)
	Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	Expect(cmd.Wait()).To(Succeed(), "mount log: %s", &log)
}
