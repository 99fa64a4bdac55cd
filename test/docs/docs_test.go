package docs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers"
	"github.com/burstcache/burstcache/test/apiserver"
	"github.com/burstcache/burstcache/test/docs"
	"github.com/burstcache/burstcache/test/repo"
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

// configFiles are API groups of the configuration files that documents
// show (the API server's admission configuration): files a component
// reads, not objects to create. The local cluster reads the one the admin
// guide shows (hack/local-cluster).
var configFiles = map[string]bool{
	"apiserver.config.k8s.io": true,
}

func TestDocumentedObjectsAreAccepted(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	examples, err := docs.Examples(filepath.Join(root, "docs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 5 {
		t.Fatalf("found %d objects in docs/*.md; the guides show more, so the extraction is broken", len(examples))
	}
	c := startOperator(t)
	ctx := t.Context()
	sort.SliceStable(examples, func(i, j int) bool { return rank(examples[i].Object) < rank(examples[j].Object) })
	for _, ex := range examples {
		obj := ex.Object
		if configFiles[obj.GroupVersionKind().Group] {
			t.Logf("%s: %s not applied: a configuration file, not an object", ex.Source, obj.GetKind())
			continue
		}
		if notInstalled[obj.GroupVersionKind().Group] {
			t.Logf("%s: %s %s not applied: its CRD is not installed here; its pod templates are", ex.Source, obj.GetKind(), obj.GetName())
			checkPodTemplates(t, c, ex, nil)
			continue
		}
		ensureNamespace(t, c, obj.GetNamespace())
		if err := c.Create(ctx, obj.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("%s: creating %s %s: %v", ex.Source, obj.GetKind(), obj.GetName(), err)
			continue
		}
		switch obj.GetKind() {
		case "CachePool":
			addPoolNode(t, c, obj)
		case "CacheInstance":
			waitAccepted(t, c, ex)
		case "Job":
			checkPodTemplates(t, c, ex, jobOwner(t, c, obj))
		}
	}
}

// waitAccepted waits until the reconciler accepted a documented instance:
// its pool, path and identity hold together.
func waitAccepted(t *testing.T, c client.Client, ex docs.Example) {
	t.Helper()
	var inst cachev1alpha1.CacheInstance
	key := client.ObjectKey{Namespace: ex.Object.GetNamespace(), Name: ex.Object.GetName()}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := c.Get(t.Context(), key, &inst); err != nil {
			continue
		}
		if cond := meta.FindStatusCondition(inst.Status.Conditions, cachev1alpha1.ConditionAccepted); cond != nil {
			if cond.Status != metav1.ConditionTrue {
				t.Errorf("%s: CacheInstance %s not accepted: %s: %s", ex.Source, key.Name, cond.Reason, cond.Message)
			}
			return
		}
	}
	t.Errorf("%s: CacheInstance %s was never judged by the reconciler", ex.Source, key.Name)
}

// jobOwner returns the controller reference a Job's pods get.
func jobOwner(t *testing.T, c client.Client, obj *unstructured.Unstructured) *metav1.OwnerReference {
	t.Helper()
	job := &unstructured.Unstructured{}
	job.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), job); err != nil {
		t.Fatal(err)
	}
	return metav1.NewControllerRef(job, obj.GroupVersionKind())
}

// checkPodTemplates creates, as a server-side dry run, the pods that the
// object's pod templates would make, so that the pod admission webhook
// (scheduling gates, #DW directives) judges them as it would judge the
// real pods.
func checkPodTemplates(t *testing.T, c client.Client, ex docs.Example, owner *metav1.OwnerReference) {
	t.Helper()
	for i, tmpl := range podTemplates(ex.Object) {
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
			t.Errorf("%s: pod template %d: %v", ex.Source, i, err)
			continue
		}
		pod.Name, pod.Namespace = fmt.Sprintf("%s-%d", ex.Object.GetName(), i), ex.Object.GetNamespace()
		if owner != nil {
			pod.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		if err := c.Create(t.Context(), pod, client.DryRunAll); err != nil {
			t.Errorf("%s: a pod of %s %s would be refused: %v", ex.Source, ex.Object.GetKind(), ex.Object.GetName(), err)
		}
	}
}

// podTemplates returns the pod templates of a Job or a Volcano Job.
func podTemplates(obj *unstructured.Unstructured) []map[string]any {
	if tmpl, ok, _ := unstructured.NestedMap(obj.Object, "spec", "template"); ok {
		return []map[string]any{tmpl}
	}
	var out []map[string]any
	tasks, _, _ := unstructured.NestedSlice(obj.Object, "spec", "tasks")
	for _, task := range tasks {
		if m, ok := task.(map[string]any); ok {
			if tmpl, ok, _ := unstructured.NestedMap(m, "template"); ok {
				out = append(out, tmpl)
			}
		}
	}
	return out
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
	// The API server taints new nodes not-ready; the node lifecycle
	// controller, which envtest lacks, lifts it once the kubelet reports.
	node.Spec.Taints = nil
	if err := c.Update(t.Context(), node); err != nil {
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
func startOperator(t *testing.T) client.Client {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env, cfg, err := apiserver.Start(apiserver.Options{CRDs: true, Webhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	wo := env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller:    controllers.ControllerOptions(),
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
	if err := apiserver.WaitForWebhooks(t.Context(), wo); err != nil {
		t.Fatal(err)
	}
	return c
}
