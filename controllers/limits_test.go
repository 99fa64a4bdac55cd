package controllers_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Limits", func() {
	It("holds the servers to spec.limits from their start, and to a change of it while they run", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		inst.Spec.Limits = &cachev1alpha1.Limits{MaxFileSize: ptr(resource.MustParse("2Mi"))}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		mp, cmd, log := startMount(inst, addrs)
		defer func() {
			Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Expect(cmd.Wait()).To(Succeed(), "mount log: %s", log)
		}()
		write := func(name string, n int) error { return os.WriteFile(filepath.Join(mp, name), make([]byte, n), 0o644) }

		By("maxFileSize from the server's start")
		Expect(errors.Is(write("big", 3<<20), syscall.EFBIG)).To(BeTrue(), "a file past maxFileSize")

		By("a larger maxFileSize and a maxFiles, changed on the running instance")
		cur := get(inst)(Default)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Limits.MaxFileSize = ptr(resource.MustParse("8Mi"))
		cur.Spec.Limits.MaxFiles = ptr(int64(2))
		Expect(k8sClient.Patch(ctx, cur, patch)).To(Succeed())
		Eventually(func() error { return write("big", 3<<20) }, 20*time.Second, 200*time.Millisecond).Should(Succeed(), "mount log: %s", log)
		Expect(write("second", 1)).To(Succeed())
		Expect(errors.Is(write("third", 1), syscall.EDQUOT)).To(BeTrue(), "a file past maxFiles")
	})
})
