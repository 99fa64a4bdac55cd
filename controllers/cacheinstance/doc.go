// Package cacheinstance reconciles CacheInstances: it checks an instance
// against its pool, places one cache server per distinct node of the pool,
// runs them as pods behind a headless Service, aggregates their statistics
// into status, pushes knob changes to them live, and at deletion holds the
// instance until no pod mounts it and every server has written its dirty
// data back (or the user chose Discard or a timeout).
//
// Server pods are created directly, one per server, each pinned to its
// node, rather than through a StatefulSet: a server's cache data lives on
// its node, so a pod that is recreated must land on the same node, and the
// placement is recorded in status.servers. Server pods, their Service and
// their PodDisruptionBudget carry no owner reference to the instance, so
// that the garbage collector, whatever the deletion propagation, never
// removes them before the teardown write-back ends; the reconciler deletes
// them itself. A finalizer on each server pod keeps its object (and the
// node placement it records) until the teardown releases it, and the
// PodDisruptionBudget refuses evictions, such as those of a node drain.
//
// When the pool's media is a StorageClass of local volumes, each server
// keeps its data on a claim of its own, created before its pod. The claim
// carries the same finalizer and no owner reference; teardown deletes it
// after the servers are gone, and lets the instance go only once the claim
// is gone too, so that a later instance of the same name never finds it.
package cacheinstance
