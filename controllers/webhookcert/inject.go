package webhookcert

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func klogRef(o client.Object) klog.ObjectRef { return klog.KObj(o) }

// injectCABundle sets ca as the caBundle of every webhook of the named
// configurations, patching only when one differs. The patch carries the
// resourceVersion, so a concurrent writer makes it fail and the next check
// retries on fresh data.
func (p *Provisioner) injectCABundle(ctx context.Context, o Options, ca []byte) error {
	if name := o.MutatingWebhookConfiguration; name != "" {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := p.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			return fmt.Errorf("reading mutating webhook configuration %s: %w", name, err)
		}
		orig := cfg.DeepCopy()
		changed := false
		for i := range cfg.Webhooks {
			changed = setBundle(&cfg.Webhooks[i].ClientConfig, ca) || changed
		}
		if err := p.patchIfChanged(ctx, cfg, orig, changed); err != nil {
			return err
		}
	}
	if name := o.ValidatingWebhookConfiguration; name != "" {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := p.Client.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			return fmt.Errorf("reading validating webhook configuration %s: %w", name, err)
		}
		orig := cfg.DeepCopy()
		changed := false
		for i := range cfg.Webhooks {
			changed = setBundle(&cfg.Webhooks[i].ClientConfig, ca) || changed
		}
		return p.patchIfChanged(ctx, cfg, orig, changed)
	}
	return nil
}

func setBundle(cc *admissionregistrationv1.WebhookClientConfig, ca []byte) bool {
	if bytes.Equal(cc.CABundle, ca) {
		return false
	}
	cc.CABundle = ca
	return true
}

func (p *Provisioner) patchIfChanged(ctx context.Context, obj, orig client.Object, changed bool) error {
	if !changed {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Setting the webhook caBundle", "configuration", obj.GetName())
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := p.Client.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("setting the caBundle of %s: %w", obj.GetName(), err)
	}
	return nil
}

// writeCertDir writes the serving pair into dir, each file replaced
// atomically and only when it changed, so the webhook server's certificate
// watcher reloads only on a real change. The key is written first: a
// watcher that reads between the two renames sees a mismatched pair, fails
// to load it and keeps serving the previous one until the next event.
func writeCertDir(dir string, b *bundle) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the cert dir: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{KeyKey, b.keyPEM}, {CertKey, b.certPEM}, {CACertKey, b.caPEM}} {
		if err := writeIfChanged(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}
