package docs_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers"
	"github.com/burstcache/burstcache/test/docs"
)

// notInstalled are API groups that documents show (jobs of other
// schedulers) whose CRDs this test does not have. Their objects are checked
// to parse, and reported as skipped.
var notInstalled = map[string]bool{
	"batch.volcano.sh":      true,
	"scheduling.volcano.sh": true,
	"kueue.x-k8s.io":        true,
	"monitoring.coreos.com": true,
}

func TestDocumentedObjectsAreAccepted(t *testing.T) {
	root := repoRoot(t)
	examples, err := docs.Examples(filepath.Join(root, "docs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 5 {
		t.Fatalf("found %d objects in docs/*.md; the guides show more, so the extraction is broken", len(examples))
	}
	c := startOperator(t, root)
	ctx := t.Context()
	sort.SliceStable(examples, func(i, j int) bool { return rank(examples[i].Object) < rank(examples[j].Object) })
	for _, ex := range examples {
		obj := ex.Object
		if notInstalled[obj.GroupVersionKind().Group] {
			t.Logf("%s: %s %s not applied: its CRD is not installed here", ex.Source, obj.GetKind(), obj.GetName())
			continue
		}
		ensureNamespace(t, c, obj.GetNamespace())
		if err := c.Create(ctx, obj.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s: creating %s %s: %v", ex.Source, obj.GetKind(), obj.GetName(), err)
			continue
		}
		if obj.GetKind() == "CachePool" {
			addPoolNode(t, c, obj)
		}
	}
}

// rank orders objects so that what others refer to exists first.
func rank(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "Namespace":
		return 0
	case "CachePool", "StorageClass":
		return 1
	case "CacheInstance", "PersistentVolume":
		return 2
	default:
		return 3
	}
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if name == "" {
		return
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// addPoolNode gives a documented pool a node that matches it, and waits
// until the pool reports its capacity, so that the instances the documents
// show fit as they would in a real cluster.
func addPoolNode(t *testing.T, c client.Client, obj *unstructured.Unstructured) {
	t.Helper()
	labels, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "nodes", "nodeSelector")
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-for-" + obj.GetName(), Labels: labels}}
	if err := c.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var pool cachev1alpha1.CachePool
		if err := c.Get(t.Context(), client.ObjectKey{Name: obj.GetName()}, &pool); err == nil && len(pool.Status.Nodes) > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pool %s never reported its node", obj.GetName())
}

// startOperator starts a kube-apiserver with the CRDs and webhooks, and the
// operator's controllers and webhooks in a manager, as `burstcache manager`
// runs them.
func startOperator(t *testing.T, root string) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets(t, root),
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")}},
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	wo := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := controllers.Setup(ctx, mgr, controllers.Options{Webhooks: true}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	waitForWebhooks(t, wo)
	return c
}

// waitForWebhooks waits until the manager's webhook server accepts TLS
// connections.
func waitForWebhooks(t *testing.T, wo envtest.WebhookInstallOptions) {
	t.Helper()
	addr := net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a local readiness probe
		if err == nil {
			_ = conn.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the admission webhooks never answered")
}

func assets(t *testing.T, root string) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin", "k8s")
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		t.Fatalf("kube-apiserver not found in %s: run `make envtest`", dir)
	}
	return dir
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}
