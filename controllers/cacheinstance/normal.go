package cacheinstance

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/policy"
)

// reconcileNormal brings a live instance towards Ready and keeps its
// status current.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	res, err := runPhases(ctx, s, []phaseFunc{r.loadPool, r.validate})
	if err != nil || !res.IsZero() {
		return res, err
	}
	phases := []phaseFunc{
		r.loadServerPods,
		r.loadCacheClaims,
		r.allocate,
		r.markNamespace,
		r.ensureService,
		r.ensureDisruptionBudget,
		r.ensureSecret,
		r.ensureCacheClaims,
		r.ensurePods,
		r.observeServers,
		r.observeMounts,
		r.collectStats,
		r.pushTunables,
		r.preload,
		r.releaseGates,
		r.serveRequest,
	}
	if s.rejected != nil {
		phases = r.refusedPhases()
	}
	if res, err = runPhases(ctx, s, phases); err != nil || !res.IsZero() {
		return res, err
	}
	return r.nextPoll(s), nil
}

// nextPoll is when a pass that went through comes again. Usage is polled:
// the servers do not call back.
func (r *Reconciler) nextPoll(s *scope) ctrl.Result {
	next := r.Options.StatsInterval
	if s.requeueAfter > 0 {
		next = min(next, s.requeueAfter)
	}
	return ctrl.Result{RequeueAfter: next}
}

// loadPool reads the pool, the namespace's labels and the pool's nodes.
func (r *Reconciler) loadPool(ctx context.Context, s *scope) (ctrl.Result, error) {
	pool := &cachev1alpha1.CachePool{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: s.inst.Spec.Pool}, pool)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading CachePool %s: %w", s.inst.Spec.Pool, err)
	}
	s.pool = pool
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: s.inst.Namespace}, ns); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading namespace %s: %w", s.inst.Namespace, err)
	}
	s.nsLabels = ns.Labels
	// Every pass reads every node; the cache's objects are read, not
	// copied, since nothing here modifies them.
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing nodes: %w", err)
	}
	s.nodes = policy.MatchingNodes(pool, nodes.Items)
	return ctrl.Result{}, nil
}

// validate checks the instance against its pool again, whatever the
// webhook said: the pool may have changed since, and the webhook may have
// been bypassed. An instance the pool refuses before its servers were
// placed is a terminal error: nothing but a change of the instance or the
// pool (both of which trigger a new pass) can fix it. One whose servers
// were placed goes on with refusedPhases.
func (r *Reconciler) validate(_ context.Context, s *scope) (ctrl.Result, error) {
	err := policy.Validate(s.inst, s.pool, s.nsLabels).Err()
	if !errors.As(err, &s.rejected) || len(s.inst.Status.Servers) > 0 {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("CacheInstance refused by its pool: %w", err))
}

// refusedPhases are the phases of an instance whose pool refuses it since
// its servers were placed (the pool's rules changed): it is Failed, and no
// pod waiting for it is let go, but its servers run on for the pods that
// use it already, as Kubernetes lets running pods run when an admission
// rule changes, and only deleting it stops them, with the write-back of its
// dirty data. Its status follows what the servers hold and who mounts it,
// and user requests (a flush before deleting it) are served. Nothing is
// created, changed or preloaded.
func (r *Reconciler) refusedPhases() []phaseFunc {
	return []phaseFunc{
		r.loadServerPods,
		r.observeServers,
		r.observeMounts,
		r.collectStats,
		r.serveRequest,
	}
}
