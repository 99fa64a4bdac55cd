package controllers_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// writeUntilRefused writes 1Mi blocks to rel through a real FUSE mount,
// syncing each, until a write fails or max bytes were written, and returns
// the failure.
func writeUntilRefused(inst *cachev1alpha1.CacheInstance, addrs []string, rel string, max int) error {
	GinkgoHelper()
	mp := filepath.Join(GinkgoT().TempDir(), "mnt")
	Expect(os.Mkdir(mp, 0o755)).To(Succeed())
	readyFile := mp + ".ready"
	cmd := exec.Command(bin, "mount", "--servers", strings.Join(addrs, ","), "--secret-file", dataSecretFile(inst), "--ready-file", readyFile, mp)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	Expect(cmd.Start()).To(Succeed())
	defer func() {
		Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		_ = cmd.Wait()
	}()
	Eventually(func() error { _, err := os.Stat(readyFile); return err }, 20*time.Second, 50*time.Millisecond).
		Should(Succeed(), "mount did not start: %s", &log)
	f, err := os.Create(filepath.Join(mp, rel))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	block := bytes.Repeat([]byte("w"), 1<<20)
	for n := 0; n < max; n += len(block) {
		if _, err := f.Write(block); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

var _ = Describe("Write window", func() {
	It("turns the instance read-only with a condition and an Event once the window is used up", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		inst.Spec.Limits = &cachev1alpha1.Limits{WriteWindow: &cachev1alpha1.WriteWindow{
			Multiplier: ptr(int32(1)), Length: &metav1.Duration{Duration: time.Hour},
		}}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		Eventually(func(g Gomega) *metav1.Condition {
			return meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionReadOnly)
		}, 10*time.Second, 200*time.Millisecond).Should(HaveField("Status", metav1.ConditionFalse))

		err := writeUntilRefused(inst, addrs, "big.dat", 96<<20)
		Expect(errors.Is(err, syscall.EROFS)).To(BeTrue(), "writing past the window: %v", err)
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Usage.WindowBytesWritten).To(BeNumerically(">=", 64<<20))
			c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionReadOnly)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonWriteWindowExceeded))
			g.Expect(c.Message).To(ContainSubstring("server-0"))
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonWriteWindowExceeded))
	})
})
