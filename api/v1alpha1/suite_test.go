package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// The suite runs the CRDs of config/crd/bases in a real kube-apiserver and
// etcd (built by hack/envtest.sh), so that what it proves about validation
// and defaulting is what users get.

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
	repoRoot  string
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "API (CRD schema) Suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	repoRoot, err = findRepoRoot()
	Expect(err).NotTo(HaveOccurred())
	assets, err := envtestAssets(repoRoot)
	Expect(err).NotTo(HaveOccurred())
	// envtest reads KUBEBUILDER_ASSETS before BinaryAssetsDirectory, so a
	// stale value must not win over the directory found here.
	Expect(os.Setenv("KUBEBUILDER_ASSETS", assets)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred(), "starting kube-apiserver and etcd from %s", assets)

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// envtestAssets returns the directory holding kube-apiserver and etcd:
// KUBEBUILDER_ASSETS if it has them (the Makefile sets it to bin/k8s), else
// bin/k8s of the checkout. Without them the suite fails rather than skips, so
// that a missing apiserver can never pass for green.
func envtestAssets(root string) (string, error) {
	var tried []string
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		tried = append(tried, dir)
	}
	tried = append(tried, filepath.Join(root, "bin", "k8s"))
	for _, dir := range tried {
		if fi, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil && !fi.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no kube-apiserver in %s: run `make envtest` to build kube-apiserver and etcd",
		strings.Join(tried, " or "))
}

// findRepoRoot walks up from the working directory (the package directory
// under go test) to the directory holding go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// newNamespace creates a namespace for one test and returns its name.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-test-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// TestEnvtestAssets checks where the suite looks for kube-apiserver, and that
// it fails with directions when there is none.
func TestEnvtestAssets(t *testing.T) {
	root := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	if _, err := envtestAssets(root); err == nil || !strings.Contains(err.Error(), "run `make envtest`") {
		t.Fatalf("envtestAssets without binaries: got error %v, want one that says to run make envtest", err)
	}

	binK8s := filepath.Join(root, "bin", "k8s")
	writeExecutable(t, filepath.Join(binK8s, "kube-apiserver"))
	if got, err := envtestAssets(root); err != nil || got != binK8s {
		t.Fatalf("envtestAssets with bin/k8s: got %q, %v; want %q", got, err, binK8s)
	}

	t.Setenv("KUBEBUILDER_ASSETS", filepath.Join(root, "empty"))
	if got, err := envtestAssets(root); err != nil || got != binK8s {
		t.Fatalf("envtestAssets with an empty KUBEBUILDER_ASSETS: got %q, %v; want %q", got, err, binK8s)
	}

	assets := filepath.Join(root, "assets")
	writeExecutable(t, filepath.Join(assets, "kube-apiserver"))
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	if got, err := envtestAssets(root); err != nil || got != assets {
		t.Fatalf("envtestAssets with KUBEBUILDER_ASSETS: got %q, %v; want %q", got, err, assets)
	}
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
