package webhookcert

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Issuer says who issues the webhook certificate.
type Issuer string

const (
	// IssuerSelf means the Provisioner issues the CA and serving
	// certificate and sets the caBundle.
	IssuerSelf Issuer = "self"
	// IssuerExternal means someone else (cert-manager) fills the Secret
	// and the caBundle; the Provisioner only copies the Secret to the cert
	// dir.
	IssuerExternal Issuer = "external"
)

// ErrSecretMissing is returned with the External issuer while the Secret
// does not exist yet.
var ErrSecretMissing = errors.New("webhook certificate secret does not exist yet")

// Options configure a Provisioner. Namespace, SecretName, ServiceName and
// CertDir are required; zero durations take the defaults noted.
type Options struct {
	// Namespace holds the Secret and the webhook Service.
	Namespace string
	// SecretName names the Secret that holds the certificates.
	SecretName string
	// ServiceName names the webhook Service; the serving certificate covers
	// its in-cluster DNS names.
	ServiceName string
	// Issuer says who issues; empty means IssuerSelf.
	Issuer Issuer
	// CertDir is the webhook server's certificate directory; tls.crt and
	// tls.key are written there.
	CertDir string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration name
	// the configurations whose caBundle is set (Self issuer); empty skips.
	MutatingWebhookConfiguration, ValidatingWebhookConfiguration string
	// CAValidity is the lifetime of a new CA (default ten years).
	CAValidity time.Duration
	// Validity is the lifetime of a new serving certificate (default one year).
	Validity time.Duration
	// RenewBefore is how long before expiry a certificate is issued again
	// (default 30 days, and at most a third of Validity).
	RenewBefore time.Duration
	// CheckInterval is how often Start checks the Secret and the caBundle
	// (default one minute).
	CheckInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Issuer == "" {
		o.Issuer = IssuerSelf
	}
	if o.CAValidity == 0 {
		o.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if o.Validity == 0 {
		o.Validity = 365 * 24 * time.Hour
	}
	if o.RenewBefore == 0 {
		o.RenewBefore = min(30*24*time.Hour, o.Validity/3)
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// DNSNames are the names the serving certificate covers.
func (o Options) DNSNames() []string {
	s, ns := o.ServiceName, o.Namespace
	return []string{s + "." + ns + ".svc", s + "." + ns + ".svc.cluster.local", s + "." + ns, s}
}

// Provisioner keeps the webhook certificate issued, stored, written to the
// cert dir and trusted by the webhook configurations. It is a manager
// Runnable that runs on every replica, leader or not, since each serves
// webhooks from its own cert dir.
type Provisioner struct {
	// Client must read without a cache: the manager's RBAC grants get on
	// one named Secret, not list or watch.
	Client  client.Client
	Options Options
}

// Ensure makes the certificate current once: reads, issues or renews the
// Secret, writes the cert dir, and (Self issuer) sets the caBundle.
func (p *Provisioner) Ensure(ctx context.Context) error {
	o := p.Options.withDefaults()
	var b *bundle
	var err error
	if o.Issuer == IssuerExternal {
		b, err = p.readExternal(ctx, o)
	} else {
		b, err = p.reconcileSecret(ctx, o)
	}
	if err != nil {
		return err
	}
	// The caBundle is published before the cert dir changes, so that the
	// API server trusts a new CA before this replica serves what it signed.
	if o.Issuer == IssuerSelf {
		if err := p.injectCABundle(ctx, o, b.trustBundle(o.Now())); err != nil {
			return err
		}
	}
	return writeCertDir(o.CertDir, b)
}

// WaitReady calls Ensure until it succeeds, for the manager to call before
// its webhook server starts; it gives up when ctx ends.
func (p *Provisioner) WaitReady(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("secret", types.NamespacedName{Namespace: p.Options.Namespace, Name: p.Options.SecretName})
	var last error
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		if last = p.Ensure(ctx); last != nil {
			log.Info("Waiting for the webhook certificate", "reason", last.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("provisioning the webhook certificate: %w (last: %w)", err, last)
	}
	return nil
}

// Start checks the certificate every CheckInterval until ctx ends, so that
// it is renewed before expiry and a caBundle reset by an upgrade is set
// again. Failures are logged and retried at the next tick.
func (p *Provisioner) Start(ctx context.Context) error {
	o := p.Options.withDefaults()
	log := ctrl.LoggerFrom(ctx).WithName("webhookcert")
	t := time.NewTicker(o.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := p.Ensure(ctx); err != nil {
				log.Error(err, "Checking the webhook certificate")
			}
		}
	}
}

// NeedLeaderElection is false: every replica needs the files.
func (p *Provisioner) NeedLeaderElection() bool { return false }

func (p *Provisioner) readExternal(ctx context.Context, o Options) (*bundle, error) {
	sec := &corev1.Secret{}
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}, sec)
	if apierrors.IsNotFound(err) {
		return nil, ErrSecretMissing
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", o.SecretName, err)
	}
	return parseBundle(sec.Data, false)
}

// reconcileSecret returns the stored bundle, issuing it or renewing what
// is stale first. Concurrent replicas are ordered by the API server: a
// create that finds the Secret, or an update that conflicts, fails, and the
// caller's next attempt reads what the other replica stored.
func (p *Provisioner) reconcileSecret(ctx context.Context, o Options) (*bundle, error) {
	key := types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}
	sec := &corev1.Secret{}
	err := p.Client.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) {
		return p.createSecret(ctx, o)
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s: %w", key, err)
	}
	b, perr := parseBundle(sec.Data, true)
	now := o.Now()
	if perr == nil && !b.caStale(now, o.RenewBefore) && !b.servingStale(now, o.RenewBefore, o.DNSNames()) {
		return b, nil
	}
	if perr != nil || b.caStale(now, o.RenewBefore) {
		var previous []byte
		if perr == nil {
			previous = b.caPEM
		}
		if b, err = newCA(now, o.CAValidity, o.ServiceName+"-ca"); err != nil {
			return nil, err
		}
		b.previousCAPEM = previous
	}
	if err := b.issueServing(now, o.Validity, o.DNSNames()); err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("Renewing the webhook certificate", "secret", key, "notAfter", b.cert.NotAfter)
	sec.Data = b.data()
	if err := p.Client.Update(ctx, sec); err != nil {
		return nil, fmt.Errorf("storing the renewed certificate in %s: %w", key, err)
	}
	return b, nil
}

func (p *Provisioner) createSecret(ctx context.Context, o Options) (*bundle, error) {
	now := o.Now()
	b, err := newCA(now, o.CAValidity, o.ServiceName+"-ca")
	if err != nil {
		return nil, err
	}
	if err := b.issueServing(now, o.Validity, o.DNSNames()); err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.SecretName,
			Labels: map[string]string{"app.kubernetes.io/name": "burstcache", "app.kubernetes.io/component": "webhook-cert"}},
		Type: corev1.SecretTypeTLS,
		Data: b.data(),
	}
	ctrl.LoggerFrom(ctx).Info("Issuing the webhook certificate", "secret", klogRef(sec), "notAfter", b.cert.NotAfter)
	if err := p.Client.Create(ctx, sec); err != nil {
		return nil, fmt.Errorf("storing the new certificate in %s: %w", o.SecretName, err)
	}
	return b, nil
}
