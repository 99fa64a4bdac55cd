package cacheinstance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/hint"
)

// PoolIndex is the field index of CacheInstances by spec.pool.
const PoolIndex = "spec.pool"

// Reconciler reconciles CacheInstances.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, bypassing the cache.
	APIReader client.Reader
	// Recorder records Events on instances.
	Recorder events.EventRecorder
	// Options are the reconciler's settings.
	Options Options

	// requests runs user hints in the background, preloads spec.preload.
	requests, preloads *hint.Runner
	// secrets remembers the instances' data secrets for control calls.
	secrets secretCache
	// placing makes placements of servers one at a time (see allocate).
	placing sync.Mutex
	// warned are the gated pods told that their instance will not become
	// Ready (warnGatedPods).
	warned warnedPods
}

// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cacheinstances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cacheinstances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cacheinstances/finalizers,verbs=update
// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cachepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler, and the index of instances by
// pool, with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.Options.complete()
	r.requests = hint.NewRunner(ctx, r.Options.RequestAttemptTimeout)
	r.preloads = hint.NewRunner(ctx, r.Options.PreloadAttemptTimeout)
	err := mgr.GetFieldIndexer().IndexField(ctx, &cachev1alpha1.CacheInstance{}, PoolIndex,
		func(o client.Object) []string { return []string{o.(*cachev1alpha1.CacheInstance).Spec.Pool} })
	if err != nil {
		return fmt.Errorf("indexing CacheInstances by pool: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.CacheInstance{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToInstance)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(claimToInstance)).
		// The manager caches only mount Leases (see controllers.CacheOptions),
		// not every node's heartbeat.
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(leaseToInstance)).
		// Pool status changes whenever an instance comes or goes; only spec
		// changes matter to instances.
		Watches(&cachev1alpha1.CachePool{}, handler.EnqueueRequestsFromMapFunc(r.poolToInstances),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.MaxConcurrentReconciles}).
		Named("cacheinstance").
		Complete(r)
}

// Reconcile fetches the instance, makes sure it carries the teardown
// finalizer, and runs reconcileDelete or reconcileNormal; the status it
// computed is written once, on the way out.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	inst := &cachev1alpha1.CacheInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, inst); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if inst.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(inst, cachev1alpha1.Finalizer) {
		return ctrl.Result{}, r.addFinalizer(ctx, inst)
	}
	s := newScope(inst)
	defer func() { retErr = errors.Join(retErr, r.patchStatus(ctx, s, retErr)) }()
	if !inst.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

func (r *Reconciler) addFinalizer(ctx context.Context, inst *cachev1alpha1.CacheInstance) error {
	patch := client.MergeFromWithOptions(inst.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(inst, cachev1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, inst, patch); err != nil {
		return fmt.Errorf("adding the teardown finalizer: %w", err)
	}
	return nil
}

// patchStatus computes the conditions and phase of this pass, records
// Events for transitions, and writes status. observedGeneration moves only
// when the pass succeeded.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope, passErr error) error {
	if s.gone {
		r.warnGatedPods(ctx, s, cachev1alpha1.PhaseDeleting)
		return nil
	}
	setConditions(s, r.Options.Now())
	if passErr == nil {
		s.inst.Status.ObservedGeneration = s.inst.Generation
	}
	r.recordTransitions(s)
	r.warnGatedPods(ctx, s, s.inst.Status.Phase)
	r.recordCreateFailure(s)
	r.recordReadOnlyTransition(s)
	r.recordWriteBackTransition(s)
	r.recordIndexCommitTransition(s)
	r.recordOutdatedTransition(s)
	err := r.Client.Status().Patch(ctx, s.inst, client.MergeFrom(s.original))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	return nil
}

// phaseFunc is one step of a pass. A step that must wait returns a result
// with RequeueAfter; one that failed returns an error; either ends the pass.
type phaseFunc func(ctx context.Context, s *scope) (ctrl.Result, error)

// runPhases runs the steps in order until one waits or fails, or finds
// the instance gone.
func runPhases(ctx context.Context, s *scope, phases []phaseFunc) (ctrl.Result, error) {
	for _, p := range phases {
		res, err := p(ctx, s)
		if err != nil || !res.IsZero() || s.gone {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}

// podToInstance maps a pod labelled with an instance, a server or a pod
// that mounts it, to that instance.
func podToInstance(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[cachev1alpha1.LabelInstance]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// claimToInstance maps a cache claim to its instance. Claims of the
// instance's users carry no component label and are left out.
func claimToInstance(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[cachev1alpha1.LabelComponent] != cachev1alpha1.ComponentServer {
		return nil
	}
	return podToInstance(ctx, o)
}

// poolToInstances maps a pool to the instances that use it.
func (r *Reconciler) poolToInstances(ctx context.Context, o client.Object) []reconcile.Request {
	var list cachev1alpha1.CacheInstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{PoolIndex: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the instances of a pool", "pool", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}
