package driver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/csi-driver/driver"
	"github.com/burstcache/burstcache/csi-driver/mounter"
)

var _ = Describe("Mounts of an instance that acts as its callers", func() {
	It("sign with the mount key, which its servers ask of every mount", func() {
		priv, pub, err := control.NewMountKey()
		Expect(err).NotTo(HaveOccurred())
		srv, shared := startSharedServer("--mount-public-key", pub)
		w := sharedWorld("shared", srv)
		keyRef := client.ObjectKey{Namespace: namespace, Name: cachev1alpha1.MountKeySecretName}
		p := startPluginLogging(w, &mounter.Process{Binary: bin}, time.Hour, GinkgoLogr, func(o *driver.Options) { o.MountKeySecret = keyRef })

		By("failing the stage while there is no mount key: the servers refuse a mount with the data secret alone")
		_, err = p.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).To(MatchError(ContainSubstring("admits only mounts")))
		Expect(isMounted(w.staging)).To(BeFalse())

		By("staging once the manager made the key, with the key readable by root only")
		createMountKey(keyRef, priv)
		_, err = p.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		Expect(slices.Contains(w.daemonArgs(), "--mount-key-file")).To(BeTrue(), "daemon arguments %q", w.daemonArgs())
		fi, err := os.Stat(filepath.Join(w.volumeDir(), mounter.MountKeyFile))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		Expect(os.WriteFile(filepath.Join(w.staging, "f"), []byte("as root"), 0o644)).To(Succeed())
		Expect(os.ReadFile(filepath.Join(w.staging, "f"))).To(Equal([]byte("as root")))

		_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(err).NotTo(HaveOccurred())
		flushServers([]serverProc{srv})
		Expect(os.ReadFile(filepath.Join(shared, "f"))).To(Equal([]byte("as root")))
	})

	It("take up a key made after their stage when their daemon starts again", func() {
		priv, pub, err := control.NewMountKey()
		Expect(err).NotTo(HaveOccurred())
		srv, _ := startSharedServer()
		w := sharedWorld("shared-before-keys", srv)
		keyRef := client.ObjectKey{Namespace: namespace, Name: "mount-key-made-later"}
		p := startPluginLogging(w, &mounter.Process{Binary: bin}, 200*time.Millisecond, GinkgoLogr, func(o *driver.Options) { o.MountKeySecret = keyRef })

		By("staging without a key while there is none, with servers that ask for none")
		_, err = p.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		Expect(w.daemonArgs()).NotTo(ContainElement("--mount-key-file"))

		By("remounting with the key once it exists and the servers are made anew to ask for it")
		createMountKey(keyRef, priv)
		Expect(srv.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		_ = srv.cmd.Wait()
		srv = startServer(append(srv.args, "--mount-public-key", pub))
		DeferCleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGTERM); _ = srv.cmd.Wait() })
		old := w.daemonPID()
		Expect(syscall.Kill(old, syscall.SIGKILL)).To(Succeed())
		Eventually(func(g Gomega) {
			b, err := os.ReadFile(filepath.Join(w.volumeDir(), "ready.json"))
			g.Expect(err).NotTo(HaveOccurred(), "no daemon serves")
			g.Expect(string(b)).NotTo(ContainSubstring(fmt.Sprint(old)), "the killed daemon is still recorded")
			g.Expect(w.daemonArgs()).To(ContainElement("--mount-key-file"))
			g.Expect(os.WriteFile(filepath.Join(w.staging, "f"), []byte("after"), 0o644)).To(Succeed())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		// The watcher may still hold the volume, binding its targets
		// after the new daemon became ready: kubelet asks again on Aborted.
		Eventually(func() error {
			_, err := p.node.NodeUnstageVolume(ctx, unstageReq(w))
			if err != nil && status.Code(err) != codes.Aborted {
				StopTrying("unstage failed").Wrap(err).Now()
			}
			return err
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})

// startSharedServer starts a server that acts as its callers, with the
// suite's secret and extra flags, and returns it and its backing directory.
func startSharedServer(extra ...string) (serverProc, string) {
	dir := GinkgoT().TempDir()
	secretFile, shared := filepath.Join(dir, "secret"), filepath.Join(dir, "backing")
	Expect(os.WriteFile(secretFile, []byte(secret), 0o600)).To(Succeed())
	Expect(os.Mkdir(shared, 0o755)).To(Succeed())
	srv := startServer(append([]string{"server", "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0",
		"--backing", shared, "--cache-dir", filepath.Join(dir, "cache"), "--capacity", "64Mi", "--extent-size", "1048576",
		"--secret-file", secretFile, "--act-as-caller"}, extra...))
	DeferCleanup(func() { _ = srv.cmd.Process.Signal(syscall.SIGTERM); _ = srv.cmd.Wait() })
	return srv, shared
}

// sharedWorld is a world whose instance, named name, runs as root on srv,
// so that its mounts act as each caller.
func sharedWorld(name string, srv serverProc) *world {
	w := newWorld()
	w.instance = name
	createInstanceAs(name, []serverProc{srv}, cachev1alpha1.RunAs{UID: 0, GID: 0})
	DeferCleanup(func() {
		_ = k8sClient.Delete(ctx, &cachev1alpha1.CacheInstance{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
	})
	return w
}

// createMountKey creates the Secret ref with the private mount key priv, as
// the manager makes it.
func createMountKey(ref client.ObjectKey, priv string) {
	key := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
		Data:       map[string][]byte{cachev1alpha1.MountKeySecretKey: []byte(priv)},
	}
	Expect(k8sClient.Create(ctx, key)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(ctx, key) })
}
