// Package metrics holds the manager's own Prometheus metrics, registered
// with controller-runtime's registry and served on the manager's metrics
// address next to controller-runtime's (reconcile totals and errors,
// workqueue depth and latency):
//
//	burstcache_manager_flush_duration_seconds{namespace,kind}  histogram
//	burstcache_manager_instances{namespace,phase}               gauge
//
// Cache servers publish the data-path metrics themselves, per instance.
package metrics
