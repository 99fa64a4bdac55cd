// Package webhookcert gives the manager's admission webhook server a serving
// certificate without cert-manager.
//
// With the Self issuer, a Provisioner makes a self-signed CA and a serving
// certificate for the DNS names of the webhook Service, keeps both in one
// Secret of the manager's namespace, writes the serving pair to the webhook
// server's certificate directory, and sets the caBundle of every webhook in
// the manager's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration. The Secret is the single source: a
// restarted manager, or a second replica, reads it instead of issuing again,
// so all replicas serve the certificate the caBundle vouches for. The
// serving certificate is issued again when it nears expiry, when the Service
// names change, or when it no longer chains to the CA; the CA is issued
// again only when it nears expiry itself; the CA it replaces stays in the
// caBundle until it expires, so replicas that still serve a certificate it
// signed stay trusted, and the caBundle is always published before the
// certificate it vouches for is served.
//
// With the External issuer (cert-manager, or an administrator), the
// Provisioner only waits for the Secret and copies it to the certificate
// directory; whoever issues it also sets the caBundle.
//
// Secret layout (type kubernetes.io/tls): tls.crt and tls.key hold the
// serving pair, ca.crt the CA certificate, and, with the Self issuer only,
// ca.key the CA's private key, which never leaves the Secret and the
// manager's memory, and after a CA renewal ca-previous.crt, the CA it
// replaced.
package webhookcert
