package controllers_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Access modes", func() {
	It("serves a LoadBalanced instance read-only, whole files from each server, to a load-balanced mount", func() {
		w := newWorld()
		data := make([]byte, 3<<20+17)
		for i := range data {
			data[i] = byte(i * 7)
		}
		host := filepath.Join(w.hostPath(w.backing), "input")
		Expect(os.WriteFile(host, data, 0o644)).To(Succeed())
		Expect(os.Chown(host, runAsUID, runAsGID)).To(Succeed())
		inst := w.instance("128Mi")
		inst.Spec.AccessMode = cachev1alpha1.AccessModeLoadBalanced
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 2)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		for _, srv := range get(inst)(Default).Status.Servers {
			By("reading through a mount that the server on " + srv.Node + " serves alone")
			mp, cmd, log := startMount(inst, addrs, "--load-balanced", "--node", srv.Node)
			got, err := os.ReadFile(filepath.Join(mp, "input"))
			Expect(err).NotTo(HaveOccurred(), "mount log: %s", log)
			Expect(got).To(Equal(data))
			err = os.WriteFile(filepath.Join(mp, "new"), []byte("x"), 0o644)
			Expect(errors.Is(err, syscall.EROFS)).To(BeTrue(), "a write to a LoadBalanced instance: %v", err)
			Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Expect(cmd.Wait()).To(Succeed(), "mount log: %s", log)
		}
	})
})
