package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// webhookWait bounds WaitForWebhooks: a webhook server that a started
// manager does not serve by then never will.
const webhookWait = 30 * time.Second

// WaitForWebhooks waits until a server accepts TLS connections at the
// address the webhook configurations of wo point at, so that a suite does
// not send objects to the apiserver before their admission webhooks answer.
// It gives up after 30 seconds or when ctx ends.
func WaitForWebhooks(ctx context.Context, wo envtest.WebhookInstallOptions) error {
	ctx, cancel := context.WithTimeout(ctx, webhookWait)
	defer cancel()
	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := dialTLS(ctx, addr)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the admission webhooks at %s: %w (last error: %w)", addr, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// dialTLS opens and closes a TLS connection to addr.
func dialTLS(ctx context.Context, addr string) error {
	d := tls.Dialer{
		NetDialer: &net.Dialer{Timeout: time.Second},
		Config:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local readiness probe
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}
