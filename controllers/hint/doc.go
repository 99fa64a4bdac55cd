// Package hint handles user hints about an instance's data (flush, evict,
// invalidate, preload on a path), which users ask for through the
// Kubernetes API with the cache.burstcache.io/request annotation, so that
// namespace RBAC decides who may ask. It parses and checks requests, for
// the admission webhook and the reconciler alike, and runs them on every
// server of an instance in the background, so that a long flush does not
// hold a reconcile worker and its progress can be reported while it runs.
package hint
