package controllers_test

import (
	"os"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/test/kubelet"
)

var _ = Describe("Control calls", func() {
	It("are served only by the server they are signed for, and the manager's reach each of its servers", func() {
		w := newWorld()
		inst := w.instance("128Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 2)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		secret, err := os.ReadFile(dataSecretFile(inst))
		Expect(err).NotTo(HaveOccurred())
		addrs := make([]string, 2)
		for _, pod := range serverPods(inst) {
			Expect(pod.Annotations).To(HaveKeyWithValue(cachev1alpha1.AnnotationControlProtocol, control.CurrentProtocol.String()))
			addrs[kubelet.IndexOf(&pod)], err = kl.Resolve(ctx, &pod)
			Expect(err).NotTo(HaveOccurred())
		}

		By("sending server 1 a drain signed for server 0, as one seen on its way there would be")
		to0 := control.Server{Addr: addrs[1], Index: 0, Protocol: control.CurrentProtocol}
		_, err = control.NewClientFor(to0, secret, nil).Drain(ctx)
		Expect(err).To(MatchError(control.ErrUnsignedAnswer))
		Expect(err.Error()).To(ContainSubstring("meant for another server"))

		By("sending server 1 a drain that names no server, as callers of earlier releases sign them")
		unnamed := control.Server{Addr: addrs[1], Index: 1, Protocol: control.ProtocolSigned}
		_, err = control.NewClientFor(unnamed, secret, nil).Drain(ctx)
		Expect(err).To(MatchError(syscall.EACCES))
		Expect(err.Error()).To(ContainSubstring("names no server"))

		By("tearing the instance down with the manager's calls, each signed for its server")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	})
})
