package webhookcert_test

import (
	"crypto/rand"
	"encoding/hex"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/burstcache/burstcache/controllers/webhookcert"
)

func randSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createWebhookConfigurations makes a mutating and a validating
// configuration of two webhooks each, pointing at the Service, without a
// caBundle, as the chart installs them. Their rules match a group nothing
// serves, so the API server never calls them.
func createWebhookConfigurations(o webhookcert.Options) {
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	cc := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: o.ServiceName}}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"unused.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"things"}},
	}}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.MutatingWebhookConfiguration}}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.ValidatingWebhookConfiguration}}
	for _, n := range []string{"a.example.com", "b.example.com"} {
		m.Webhooks = append(m.Webhooks, admissionregistrationv1.MutatingWebhook{Name: n, ClientConfig: cc, Rules: rules,
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}})
		v.Webhooks = append(v.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: n, ClientConfig: cc, Rules: rules,
			FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}})
	}
	ExpectWithOffset(1, k8sClient.Create(ctx, m)).To(Succeed())
	ExpectWithOffset(1, k8sClient.Create(ctx, v)).To(Succeed())
}

// caBundles lists the caBundle of every webhook of both configurations.
func caBundles(o webhookcert.Options) [][]byte {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: o.MutatingWebhookConfiguration}, m)).To(Succeed())
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: o.ValidatingWebhookConfiguration}, v)).To(Succeed())
	var out [][]byte
	for _, w := range m.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

// resetValidatingBundle clears the validating configuration's caBundle, as
// a client-side apply of the chart's manifest would.
func resetValidatingBundle(o webhookcert.Options) {
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: o.ValidatingWebhookConfiguration}, v)).To(Succeed())
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.CABundle = nil
	}
	ExpectWithOffset(1, k8sClient.Update(ctx, v)).To(Succeed())
}
