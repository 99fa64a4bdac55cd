package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Kinds of flushes in FlushDuration.
const (
	// KindTeardown is the write-back before an instance's servers are
	// deleted.
	KindTeardown = "teardown"
	// KindRequest is a flush a user asked for with a request.
	KindRequest = "request"
)

// FlushDuration is how long flushes run by the manager took, from their
// start to the last dirty byte written back. It is labelled by namespace
// and not by instance: a histogram per instance would multiply series by
// the number of buckets for objects that live minutes.
var FlushDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "burstcache_manager_flush_duration_seconds",
	Help:    "Time from the start of a flush run by the manager to its end, by namespace and kind (teardown or request).",
	Buckets: prometheus.ExponentialBuckets(0.1, 4, 10),
}, []string{"namespace", "kind"})

func init() {
	crmetrics.Registry.MustRegister(FlushDuration)
}

// ObserveFlush records a flush of kind in namespace that started at start
// and ended at end.
func ObserveFlush(namespace, kind string, start, end time.Time) {
	FlushDuration.WithLabelValues(namespace, kind).Observe(end.Sub(start).Seconds())
}

// instancesDesc describes the instances-by-phase gauge.
var instancesDesc = prometheus.NewDesc("burstcache_manager_instances",
	"CacheInstances by namespace and phase.", []string{"namespace", "phase"}, nil)

// phaseCollector counts instances by phase when scraped, from the
// manager's cache, so the gauge is always what the cluster holds.
type phaseCollector struct {
	reader client.Reader
}

// RegisterInstancePhases registers the instances-by-phase gauge, read with
// reader (the manager's cached client). It replaces the gauge of an
// earlier manager of the same process.
func RegisterInstancePhases(reader client.Reader) error {
	c := &phaseCollector{reader: reader}
	err := crmetrics.Registry.Register(c)
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		crmetrics.Registry.Unregister(are.ExistingCollector)
		err = crmetrics.Registry.Register(c)
	}
	return err
}

// Describe sends the gauge's description.
func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- instancesDesc }

// Collect lists the instances and sends their count per namespace and
// phase. A list that fails makes the scrape report the error rather than
// counts that would read as zero.
func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list cachev1alpha1.CacheInstanceList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(instancesDesc, err)
		return
	}
	type key struct{ ns, phase string }
	counts := map[key]int{}
	for _, in := range list.Items {
		counts[key{in.Namespace, string(in.Status.Phase)}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(n), k.ns, k.phase)
	}
}
