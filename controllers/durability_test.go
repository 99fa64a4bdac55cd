package controllers_test

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Durability", func() {
	DescribeTable("has a close return once the data is where spec.writeBack.durability puts it",
		func(durability cachev1alpha1.Durability, onBacking bool) {
			w := newWorld()
			inst := w.instance("64Mi")
			inst.Spec.WriteBack = &cachev1alpha1.WriteBack{Durability: durability}
			Expect(k8sClient.Create(ctx, inst)).To(Succeed())
			addrs := kl.RunServers(ctx, inst, 1)
			Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
			mp, cmd, log := startMount(inst, addrs)
			data := make([]byte, 3<<20+1)
			for i := range data {
				data[i] = byte(i)
			}
			writeUnder(mp, "out", data, log)
			// Far below the dirty high watermark: nothing but the close
			// writes it back.
			got, _ := os.ReadFile(filepath.Join(w.hostPath(w.backing), "out"))
			Expect(len(got) == len(data) && string(got) == string(data)).To(Equal(onBacking),
				"the backing file after the close holds %d bytes", len(got))
			Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Expect(cmd.Wait()).To(Succeed(), "mount log: %s", log)
		},
		Entry("Backing: on the backing file system", cachev1alpha1.DurabilityBacking, true),
		Entry("Cache: on the servers' SSDs only", cachev1alpha1.DurabilityCache, false),
	)
})
