package monitoring

import (
	"context"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/server"
	"github.com/burstcache/burstcache/controllers/metrics"
)

// prometheusNames are the series Prometheus itself writes for every target.
var prometheusNames = []string{"up"}

// exportedNames returns every metric name burstcache exports: the cache
// servers' from their table, the manager's from its registry (the one its
// metrics endpoint serves), and Prometheus' own per target.
func exportedNames(t *testing.T) map[string]bool {
	names := map[string]bool{}
	for _, n := range slices.Concat(server.MetricNames(), managerNames(t), prometheusNames) {
		names[n] = true
	}
	return names
}

// managerNames gathers the manager's registry. A vector shows in a gather
// only once it has a series, so this starts a real controller-runtime
// controller (which creates the series of its reconcile metrics), records a
// flush and counts one instance, as a running manager does.
func managerNames(t *testing.T) []string {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	skip := true
	c, err := controller.NewUnmanaged("cacheinstance", controller.Options{SkipNameValidation: &skip,
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	now := time.Now()
	metrics.ObserveFlush("team", metrics.KindTeardown, now, now)
	if err := metrics.RegisterInstancePhases(oneInstance{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		names := gather(t)
		if slices.Contains(names, "controller_runtime_reconcile_errors_total") {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller created no reconcile metrics; gathered %v", names)
		}
	}
}

// gather returns the names of the samples in the manager's registry.
func gather(t *testing.T) []string {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering the manager's metrics: %v", err)
	}
	var names []string
	for _, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names = append(names, f.GetName()+"_bucket", f.GetName()+"_sum", f.GetName()+"_count")
		case dto.MetricType_SUMMARY:
			names = append(names, f.GetName(), f.GetName()+"_sum", f.GetName()+"_count")
		default:
			names = append(names, f.GetName())
		}
	}
	return names
}

// oneInstance stands in for the manager's cache, which needs an API
// server: the instances-by-phase collector only lists instances, and one
// Ready instance is enough to make it write its gauge.
type oneInstance struct{ client.Reader }

// List lists one Ready instance.
func (oneInstance) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	l := list.(*cachev1alpha1.CacheInstanceList)
	l.Items = []cachev1alpha1.CacheInstance{{}}
	l.Items[0].Namespace, l.Items[0].Status.Phase = "team", cachev1alpha1.PhaseReady
	return nil
}
