package controllers_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// fullBacking mounts a tmpfs of size over the world's backing directory
// and fills it, as a parallel file system out of space would be, and
// returns the filler, whose removal makes room again.
func fullBacking(w *world, size string) string {
	GinkgoHelper()
	dir := w.hostPath(w.backing)
	Expect(unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size)).To(Succeed())
	DeferCleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	Expect(os.Chown(dir, runAsUID, runAsGID)).To(Succeed())
	filler := filepath.Join(dir, "other-files")
	f, err := os.Create(filler)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	block := make([]byte, 1<<16)
	for {
		if _, err := f.Write(block); err != nil {
			Expect(errors.Is(err, syscall.ENOSPC)).To(BeTrue(), "filling the backing directory: %v", err)
			return filler
		}
	}
}

func writeBackCondition(inst *cachev1alpha1.CacheInstance) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		return meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionWriteBackFailing)
	}
}

var _ = Describe("Write-back", func() {
	It("says with a condition and Events that the backing file system refuses the data, and when it takes it again", func() {
		w := newWorld()
		filler := fullBacking(w, "96m")
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		Eventually(writeBackCondition(inst), 10*time.Second, 200*time.Millisecond).Should(HaveField("Status", metav1.ConditionFalse))

		err := writeUntilRefused(inst, addrs, "big.dat", 96<<20)
		Expect(errors.Is(err, syscall.ENOSPC)).To(BeTrue(), "writing more than the cache holds, to a full backing file system: %v", err)
		Eventually(func(g Gomega) {
			c := writeBackCondition(inst)(g)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonWriteBackRefused))
			g.Expect(c.Message).To(ContainSubstring("server-0"))
			g.Expect(c.Message).To(ContainSubstring("no space left on device"))
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonWriteBackRefused))

		Expect(os.Remove(filler)).To(Succeed())
		Eventually(func(g Gomega) {
			c := writeBackCondition(inst)(g)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(get(inst)(g).Status.Usage.WriteBackBytes).To(BeNumerically(">", 0))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})
