package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/burstcache/burstcache/controllers/webhookcert"
)

// certFlags say how the manager gets its webhook serving certificate.
type certFlags struct {
	secret, issuer, service, mutating, validating string
}

func (c *certFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&c.secret, "webhook-cert-secret", "", "Secret (in POD_NAMESPACE) holding the webhook certificate; empty: the cert dir is filled by someone else")
	fl.StringVar(&c.issuer, "webhook-cert-issuer", string(webhookcert.IssuerSelf), `who issues the certificate in --webhook-cert-secret: "self" (a self-signed CA, and the manager sets the caBundle) or "external" (cert-manager)`)
	fl.StringVar(&c.service, "webhook-service", "burstcache-webhook-service", "Service of the webhooks, whose DNS names the certificate covers")
	fl.StringVar(&c.mutating, "mutating-webhook-configuration", "burstcache-mutating-webhook-configuration", "MutatingWebhookConfiguration whose caBundle the manager sets")
	fl.StringVar(&c.validating, "validating-webhook-configuration", "burstcache-validating-webhook-configuration", "ValidatingWebhookConfiguration whose caBundle the manager sets")
}

// provision fills the cert dir before the webhook server starts, and keeps
// it current while the manager runs.
func (c *certFlags) provision(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, mgr ctrl.Manager, certDir string) error {
	if c.secret == "" {
		return nil
	}
	if c.issuer != string(webhookcert.IssuerSelf) && c.issuer != string(webhookcert.IssuerExternal) {
		return fmt.Errorf("--webhook-cert-issuer %q: want self or external", c.issuer)
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		return fmt.Errorf("--webhook-cert-secret needs POD_NAMESPACE")
	}
	if certDir == "" {
		certDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client for the webhook certificate: %w", err)
	}
	p := &webhookcert.Provisioner{Client: direct, Options: webhookcert.Options{
		Namespace: ns, SecretName: c.secret, ServiceName: c.service, Issuer: webhookcert.Issuer(c.issuer),
		CertDir: certDir, MutatingWebhookConfiguration: c.mutating, ValidatingWebhookConfiguration: c.validating,
	}}
	if err := p.WaitReady(ctx); err != nil {
		return err
	}
	return mgr.Add(p)
}
