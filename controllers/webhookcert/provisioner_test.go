package webhookcert_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/burstcache/burstcache/controllers/webhookcert"
)

var _ = Describe("Provisioner", func() {
	var opts webhookcert.Options

	BeforeEach(func() {
		name := "wh-" + randSuffix()
		opts = webhookcert.Options{
			Namespace: namespace, SecretName: name + "-cert", ServiceName: name + "-svc",
			CertDir:                        GinkgoT().TempDir(),
			MutatingWebhookConfiguration:   name + "-mutating",
			ValidatingWebhookConfiguration: name + "-validating",
		}
		createWebhookConfigurations(opts)
	})

	It("issues a certificate for the Service, stores it, writes it and sets every caBundle", func() {
		Expect(provisioner(opts).Ensure(ctx)).To(Succeed())
		sec := secret(opts)
		Expect(sec.Type).To(Equal(corev1.SecretTypeTLS))
		Expect(caBundles(opts)).To(HaveEach(Equal(sec.Data["ca.crt"])))
		Expect(caBundles(opts)).To(HaveLen(4))
		Expect(readFile(opts.CertDir, "tls.crt")).To(Equal(sec.Data["tls.crt"]))
		Expect(readFile(opts.CertDir, "tls.key")).To(Equal(sec.Data["tls.key"]))
		leaf := parseCert(sec.Data["tls.crt"])
		for _, dns := range []string{opts.ServiceName + "." + namespace + ".svc", opts.ServiceName + "." + namespace + ".svc.cluster.local"} {
			_, err := leaf.Verify(x509.VerifyOptions{DNSName: dns, Roots: pool(sec.Data["ca.crt"])})
			Expect(err).NotTo(HaveOccurred(), dns)
		}
	})

	It("reuses the stored certificate after a restart and across replicas", func() {
		Expect(provisioner(opts).Ensure(ctx)).To(Succeed())
		before := secret(opts)
		restarted := opts
		restarted.CertDir = GinkgoT().TempDir()
		Expect(provisioner(restarted).Ensure(ctx)).To(Succeed())
		after := secret(opts)
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
		Expect(readFile(restarted.CertDir, "tls.crt")).To(Equal(before.Data["tls.crt"]))
	})

	It("lets concurrent replicas agree on one certificate", func() {
		dirs := make([]string, 3)
		var wg sync.WaitGroup
		for i := range dirs {
			dirs[i] = GinkgoT().TempDir()
			o := opts
			o.CertDir = dirs[i]
			wg.Go(func() { Expect(provisioner(o).WaitReady(ctx)).To(Succeed()) })
		}
		wg.Wait()
		sec := secret(opts)
		for _, d := range dirs {
			Expect(readFile(d, "tls.crt")).To(Equal(sec.Data["tls.crt"]))
		}
		Expect(caBundles(opts)).To(HaveEach(Equal(sec.Data["ca.crt"])))
	})

	It("renews the serving certificate before it expires, keeping the CA", func() {
		Expect(provisioner(opts).Ensure(ctx)).To(Succeed())
		first := secret(opts)
		later := opts
		later.Now = func() time.Time { return time.Now().Add(340 * 24 * time.Hour) }
		Expect(provisioner(later).Ensure(ctx)).To(Succeed())
		renewed := secret(opts)
		Expect(renewed.Data["tls.crt"]).NotTo(Equal(first.Data["tls.crt"]))
		Expect(renewed.Data["ca.crt"]).To(Equal(first.Data["ca.crt"]))
		Expect(parseCert(renewed.Data["tls.crt"]).NotAfter).To(BeTemporally(">", time.Now().Add(700*24*time.Hour)))
		Expect(readFile(opts.CertDir, "tls.crt")).To(Equal(renewed.Data["tls.crt"]))
	})

	It("renews the CA before it expires and sets the new caBundle", func() {
		Expect(provisioner(opts).Ensure(ctx)).To(Succeed())
		first := secret(opts)
		later := opts
		later.Now = func() time.Time { return time.Now().Add(3640 * 24 * time.Hour) }
		Expect(provisioner(later).Ensure(ctx)).To(Succeed())
		renewed := secret(opts)
		Expect(renewed.Data["ca.crt"]).NotTo(Equal(first.Data["ca.crt"]))
		Expect(renewed.Data["ca-previous.crt"]).To(Equal(first.Data["ca.crt"]))
		_, err := parseCert(renewed.Data["tls.crt"]).Verify(x509.VerifyOptions{
			DNSName: opts.ServiceName + "." + namespace + ".svc", Roots: pool(renewed.Data["ca.crt"]),
			CurrentTime: time.Now().Add(3640 * 24 * time.Hour)})
		Expect(err).NotTo(HaveOccurred(), "the new serving certificate is not signed by the new CA")
		By("trusting both CAs while the old one is valid, so replicas serving its certificates keep working")
		both := append(append([]byte{}, renewed.Data["ca.crt"]...), first.Data["ca.crt"]...)
		Expect(caBundles(opts)).To(HaveEach(Equal(both)))
		By("dropping the old CA once it expired")
		expired := opts
		expired.Now = func() time.Time { return time.Now().Add(3660 * 24 * time.Hour) }
		Expect(provisioner(expired).Ensure(ctx)).To(Succeed())
		Expect(caBundles(opts)).To(HaveEach(Equal(renewed.Data["ca.crt"])))
	})

	It("keeps checking: renews in the background and sets a caBundle reset by an upgrade again", func() {
		var offset atomic.Int64
		o := opts
		o.CheckInterval = 50 * time.Millisecond
		o.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		p := provisioner(o)
		Expect(p.Ensure(ctx)).To(Succeed())
		first := readFile(o.CertDir, "tls.crt")
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Start(runCtx) }()
		DeferCleanup(func() { stop(); <-done })
		resetValidatingBundle(opts)
		Eventually(func() [][]byte { return caBundles(opts) }).Should(HaveEach(Equal(secret(opts).Data["ca.crt"])))
		offset.Store(int64(340 * 24 * time.Hour))
		Eventually(func() []byte { return readFile(o.CertDir, "tls.crt") }).ShouldNot(Equal(first))
		Expect(readFile(o.CertDir, "tls.crt")).To(Equal(secret(opts).Data["tls.crt"]))
	})

	It("with the External issuer, waits for the Secret and leaves the caBundle alone", func() {
		o := opts
		o.Issuer = webhookcert.IssuerExternal
		Expect(provisioner(o).Ensure(ctx)).To(MatchError(webhookcert.ErrSecretMissing))
		issued := opts
		issued.SecretName += "-issued"
		issued.MutatingWebhookConfiguration, issued.ValidatingWebhookConfiguration = "", ""
		Expect(provisioner(issued).Ensure(ctx)).To(Succeed())
		external := secret(issued)
		external.ObjectMeta = metav1.ObjectMeta{Namespace: namespace, Name: opts.SecretName}
		delete(external.Data, "ca.key")
		Expect(k8sClient.Create(ctx, external)).To(Succeed())
		Expect(provisioner(o).Ensure(ctx)).To(Succeed())
		Expect(readFile(o.CertDir, "tls.crt")).To(Equal(external.Data["tls.crt"]))
		Expect(caBundles(opts)).To(HaveEach(BeEmpty()))
	})
})

func provisioner(o webhookcert.Options) *webhookcert.Provisioner {
	return &webhookcert.Provisioner{Client: k8sClient, Options: o}
}

func secret(o webhookcert.Options) *corev1.Secret {
	sec := &corev1.Secret{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.SecretName}, sec)).To(Succeed())
	return sec
}

func readFile(dir, name string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, name))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return b
}

func parseCert(p []byte) *x509.Certificate {
	block, _ := pem.Decode(p)
	ExpectWithOffset(1, block).NotTo(BeNil())
	c, err := x509.ParseCertificate(block.Bytes)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return c
}

func pool(ca []byte) *x509.CertPool {
	p := x509.NewCertPool()
	ExpectWithOffset(1, p.AppendCertsFromPEM(ca)).To(BeTrue())
	return p
}
