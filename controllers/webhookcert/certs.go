package webhookcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Keys of the Secret.
const (
	// CertKey holds the PEM serving certificate.
	CertKey = "tls.crt"
	// KeyKey holds the PEM serving private key.
	KeyKey = "tls.key"
	// CACertKey holds the PEM CA certificate, the webhooks' caBundle.
	CACertKey = "ca.crt"
	// CAKeyKey holds the PEM CA private key (Self issuer only).
	CAKeyKey = "ca.key"
	// PreviousCACertKey holds the CA that the current one replaced, while
	// it is valid, so that certificates it signed stay trusted until every
	// replica serves one of the new CA (Self issuer only).
	PreviousCACertKey = "ca-previous.crt"
)

// ErrIncomplete is returned when a Secret lacks a key or holds a PEM block
// that does not parse.
var ErrIncomplete = errors.New("webhook certificate secret is incomplete")

// bundle is the parsed content of the Secret.
type bundle struct {
	caCert, cert    *x509.Certificate
	caPEM, caKeyPEM []byte
	certPEM, keyPEM []byte
	previousCAPEM   []byte
	caKey           *ecdsa.PrivateKey
}

// data is the Secret data of b.
func (b *bundle) data() map[string][]byte {
	d := map[string][]byte{CACertKey: b.caPEM, CAKeyKey: b.caKeyPEM, CertKey: b.certPEM, KeyKey: b.keyPEM}
	if len(b.previousCAPEM) > 0 {
		d[PreviousCACertKey] = b.previousCAPEM
	}
	return d
}

// trustBundle is the caBundle to publish: the CA, and the previous CA
// while it is still valid at now.
func (b *bundle) trustBundle(now time.Time) []byte {
	prev, err := parseCert(b.previousCAPEM)
	if err != nil || now.After(prev.NotAfter) {
		return b.caPEM
	}
	return append(append([]byte{}, b.caPEM...), b.previousCAPEM...)
}

// parseBundle reads a Secret's data; withCAKey says whether ca.key must be
// there too.
func parseBundle(data map[string][]byte, withCAKey bool) (*bundle, error) {
	b := &bundle{caPEM: data[CACertKey], caKeyPEM: data[CAKeyKey], certPEM: data[CertKey], keyPEM: data[KeyKey],
		previousCAPEM: data[PreviousCACertKey]}
	var err error
	if b.caCert, err = parseCert(b.caPEM); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrIncomplete, CACertKey, err)
	}
	if b.cert, err = parseCert(b.certPEM); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrIncomplete, CertKey, err)
	}
	if len(b.keyPEM) == 0 {
		return nil, fmt.Errorf("%w: no %s", ErrIncomplete, KeyKey)
	}
	if withCAKey {
		if b.caKey, err = parseKey(b.caKeyPEM); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrIncomplete, CAKeyKey, err)
		}
	}
	return b, nil
}

func parseCert(p []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(p)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKey(p []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(p)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

// newCA makes a self-signed CA valid for validity from now.
func newCA(now time.Time, validity time.Duration, commonName string) (*bundle, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := sign(tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	b := &bundle{caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	if b.caKeyPEM, err = marshalKey(key); err != nil {
		return nil, err
	}
	b.caCert, err = x509.ParseCertificate(der)
	return b, err
}

// issueServing fills in b's serving pair, signed by b's CA, for dnsNames.
func (b *bundle) issueServing(now time.Time, validity time.Duration, dnsNames []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the serving key: %w", err)
	}
	notAfter := now.Add(validity)
	if notAfter.After(b.caCert.NotAfter) {
		notAfter = b.caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := sign(tmpl, b.caCert, &key.PublicKey, b.caKey)
	if err != nil {
		return err
	}
	b.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if b.keyPEM, err = marshalKey(key); err != nil {
		return err
	}
	b.cert, err = x509.ParseCertificate(der)
	return err
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, priv *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, priv)
	if err != nil {
		return nil, fmt.Errorf("signing %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

func marshalKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// caStale says whether the CA must be issued again: it expires within
// renewBefore.
func (b *bundle) caStale(now time.Time, renewBefore time.Duration) bool {
	return now.Add(renewBefore).After(b.caCert.NotAfter)
}

// servingStale says whether the serving certificate must be issued again:
// it expires within renewBefore, does not cover dnsNames, or was not signed
// by the current CA.
func (b *bundle) servingStale(now time.Time, renewBefore time.Duration, dnsNames []string) bool {
	if now.Add(renewBefore).After(b.cert.NotAfter) {
		return true
	}
	if !slices.Equal(slices.Sorted(slices.Values(b.cert.DNSNames)), slices.Sorted(slices.Values(dnsNames))) {
		return true
	}
	return !bytes.Equal(b.cert.RawIssuer, b.caCert.RawSubject) || b.cert.CheckSignatureFrom(b.caCert) != nil
}
