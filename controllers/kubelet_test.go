package controllers_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// The suite's kubelet, which runs the server pods the operator creates, is
// test/kubelet. What follows plays a CSI node plugin's mount by hand.

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
	mp, cmd, log := startMount(inst, addrs)
	writeUnder(mp, rel, data, log)
	Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	Expect(cmd.Wait()).To(Succeed(), "mount log: %s", log)
}

// hideThroughMount writes data to rel through a real FUSE mount, unlinks
// it while it holds it open, which gives it a hidden name, and kills the
// mount before the last close, as the loss of a node's mount would.
func hideThroughMount(inst *cachev1alpha1.CacheInstance, addrs []string, rel string, data []byte) {
	GinkgoHelper()
	mp, cmd, log := startMount(inst, addrs)
	full := writeUnder(mp, rel, data, log)
	f, err := os.Open(full)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.Remove(full)).To(Succeed(), "mount log: %s", log)
	Expect(cmd.Process.Kill()).To(Succeed())
	_ = cmd.Wait()
	_ = f.Close()
	Expect(syscall.Unmount(mp, syscall.MNT_DETACH)).To(Succeed())
}

// writeUnder writes data to rel in the mount at mp, whose log is log, and
// returns the file's path.
func writeUnder(mp, rel string, data []byte, log *bytes.Buffer) string {
	GinkgoHelper()
	full := filepath.Join(mp, rel)
	Expect(os.MkdirAll(filepath.Dir(full), 0o755)).To(Succeed())
	Expect(os.WriteFile(full, data, 0o644)).To(Succeed(), "mount log: %s", log)
	return full
}

// startMount starts a real FUSE mount of the instance's servers, proving
// the instance's data secret, and returns its mount point, its process and
// its log once it serves. extra are more flags of the mount.
func startMount(inst *cachev1alpha1.CacheInstance, addrs []string, extra ...string) (string, *exec.Cmd, *bytes.Buffer) {
	GinkgoHelper()
	mp := filepath.Join(GinkgoT().TempDir(), "mnt")
	Expect(os.Mkdir(mp, 0o755)).To(Succeed())
	readyFile := mp + ".ready"
	args := append([]string{"mount", "--servers", strings.Join(addrs, ","), "--secret-file", dataSecretFile(inst),
		"--ready-file", readyFile}, extra...)
	cmd := exec.Command(bin, append(args, mp)...)
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	Expect(cmd.Start()).To(Succeed())
	Eventually(func() error { _, err := os.Stat(readyFile); return err }, 20*time.Second, 50*time.Millisecond).
		Should(Succeed(), "mount did not start: %s", log)
	return mp, cmd, log
}
