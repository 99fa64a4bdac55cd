package apiserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/burstcache/burstcache/test/repo"
)

// TestAssets checks where Start looks for kube-apiserver, and that it fails
// with directions when there is none.
func TestAssets(t *testing.T) {
	root := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	if _, err := Assets(root); err == nil || !strings.Contains(err.Error(), "run `make envtest`") {
		t.Fatalf("Assets without binaries: got error %v, want one that says to run make envtest", err)
	}

	binK8s := filepath.Join(root, "bin", "k8s")
	writeExecutable(t, filepath.Join(binK8s, "kube-apiserver"))
	if got, err := Assets(root); err != nil || got != binK8s {
		t.Fatalf("Assets with bin/k8s: got %q, %v; want %q", got, err, binK8s)
	}

	t.Setenv("KUBEBUILDER_ASSETS", filepath.Join(root, "empty"))
	if got, err := Assets(root); err != nil || got != binK8s {
		t.Fatalf("Assets with an empty KUBEBUILDER_ASSETS: got %q, %v; want %q", got, err, binK8s)
	}

	assets := filepath.Join(root, "assets")
	writeExecutable(t, filepath.Join(assets, "kube-apiserver"))
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	if got, err := Assets(root); err != nil || got != assets {
		t.Fatalf("Assets with KUBEBUILDER_ASSETS: got %q, %v; want %q", got, err, assets)
	}
}

// TestNewEnvironmentInstallsWhatWasAsked checks that the options name
// manifests that exist in the checkout, and only those asked for, and that
// the webhooks are installed as kustomize makes them for the chart.
func TestNewEnvironmentInstallsWhatWasAsked(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	built, err := Assets(root)
	if err != nil {
		t.Fatal(err)
	}
	assets := t.TempDir()
	if err := os.Symlink(filepath.Join(built, "kubectl"), filepath.Join(assets, "kubectl")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBEBUILDER_ASSETS", "")
	bare, err := newEnvironment(Options{Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	wo := bare.WebhookInstallOptions
	if len(bare.CRDDirectoryPaths) != 0 || len(wo.Paths)+len(wo.MutatingWebhooks)+len(wo.ValidatingWebhooks) != 0 || bare.BinaryAssetsDirectory != assets {
		t.Fatalf("bare environment: CRDs %v, webhooks %+v, assets %q", bare.CRDDirectoryPaths, wo, bare.BinaryAssetsDirectory)
	}
	if got := os.Getenv("KUBEBUILDER_ASSETS"); got != assets {
		t.Fatalf("KUBEBUILDER_ASSETS = %q, want %q: envtest would not use the chosen binaries", got, assets)
	}
	full, err := newEnvironment(Options{CRDs: true, Webhooks: true, Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.CRDDirectoryPaths) != 1 || !full.ErrorIfCRDPathMissing {
		t.Fatalf("full environment: CRDs %v, ErrorIfCRDPathMissing %v", full.CRDDirectoryPaths, full.ErrorIfCRDPathMissing)
	}
	if _, err := os.Stat(full.CRDDirectoryPaths[0]); err != nil {
		t.Errorf("CRDs: %v", err)
	}
	wo = full.WebhookInstallOptions
	if len(wo.MutatingWebhooks) != 1 || len(wo.ValidatingWebhooks) != 1 {
		t.Fatalf("full environment: %d mutating and %d validating webhook configurations, want one of each", len(wo.MutatingWebhooks), len(wo.ValidatingWebhooks))
	}
	guards, narrowed := 0, 0
	for _, w := range wo.ValidatingWebhooks[0].Webhooks {
		if !strings.HasPrefix(w.Name, "vserverpod") {
			continue
		}
		guards++
		if w.FailurePolicy != nil && *w.FailurePolicy == admissionregistrationv1.Fail && (w.ObjectSelector != nil || len(w.MatchConditions) > 0) {
			narrowed++
		}
	}
	if guards != 2 || narrowed != 2 {
		t.Errorf("%d server pod guards, %d failing closed and narrowed: want two of each, as config/webhook's patch makes them", guards, narrowed)
	}
}

func TestWaitForWebhooks(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	if err := WaitForWebhooks(t.Context(), installedAt(t, srv.Listener.Addr().String())); err != nil {
		t.Fatalf("a serving webhook server: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := WaitForWebhooks(ctx, installedAt(t, closed)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no webhook server: got %v, want a deadline error", err)
	}
}

func installedAt(t *testing.T, addr string) envtest.WebhookInstallOptions {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return envtest.WebhookInstallOptions{LocalServingHost: host, LocalServingPort: p}
}

func writeExecutable(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o755); err != nil {
		t.Fatal(err)
	}
}
