package cachepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/cacheinstance"
	"github.com/burstcache/burstcache/controllers/policy"
)

// Reconciler reconciles CachePools.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the API server.
	Client client.Client
}

// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cachepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cachepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.burstcache.io,resources=cacheinstances,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// SetupWithManager registers the reconciler with mgr. It relies on the
// index of instances by pool that the CacheInstance reconciler registers.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.CachePool{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allPools)).
		Watches(&storagev1.StorageClass{}, handler.EnqueueRequestsFromMapFunc(r.allPools)).
		Watches(&cachev1alpha1.CacheInstance{}, handler.EnqueueRequestsFromMapFunc(instanceToPool)).
		Named("cachepool").
		Complete(r)
}

// scope is what one pass observed of a pool.
type scope struct {
	pool, original *cachev1alpha1.CachePool
	nodes          []string
	instances      []cachev1alpha1.CacheInstance
	// mediaMissing says why the pool's media cannot be provisioned, such
	// as a StorageClass that does not exist; empty if it can.
	mediaMissing string
}

// Reconcile recomputes the pool's status from its nodes and instances.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &cachev1alpha1.CachePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{pool: pool, original: pool.DeepCopy()}
	if err := r.observe(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	setCapacity(s)
	setReadyCondition(s)
	pool.Status.ObservedGeneration = pool.Generation
	if err := r.Client.Status().Patch(ctx, pool, client.MergeFrom(s.original)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
	}
	return ctrl.Result{}, nil
}

// observe reads the nodes and the pool's instances. It runs on every change
// of every instance of the pool, so it reads the cache's objects without
// copying them; nothing here modifies them.
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	s.nodes = policy.MatchingNodes(s.pool, nodes.Items)
	var list cachev1alpha1.CacheInstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{cacheinstance.PoolIndex: s.pool.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing the pool's instances: %w", err)
	}
	s.instances = list.Items
	return r.observeMedia(ctx, s)
}

// observeMedia checks that the StorageClass of the pool's media exists.
func (r *Reconciler) observeMedia(ctx context.Context, s *scope) error {
	sc := s.pool.Spec.Media.StorageClass
	if sc == nil {
		return nil
	}
	err := r.Client.Get(ctx, client.ObjectKey{Name: sc.Name}, &storagev1.StorageClass{})
	switch {
	case apierrors.IsNotFound(err):
		s.mediaMissing = fmt.Sprintf("StorageClass %s of spec.media.storageClass does not exist", sc.Name)
		return nil
	case err != nil:
		return fmt.Errorf("reading StorageClass %s: %w", sc.Name, err)
	}
	return nil
}

// setCapacity fills nodes, capacities and the instance count.
func setCapacity(s *scope) {
	st := &s.pool.Status
	st.Nodes = s.nodes
	total := policy.TotalCapacity(s.pool, len(s.nodes))
	reserved := policy.Reserved(s.instances)
	st.TotalCapacity = resource.NewQuantity(total, resource.BinarySI)
	st.FreeCapacity = resource.NewQuantity(max(total-reserved, 0), resource.BinarySI)
	st.Instances = 0
	for i := range s.instances {
		if policy.Allocated(&s.instances[i]) {
			st.Instances++
		}
	}
}

// setReadyCondition says whether the pool can serve instances, and if not
// the first reason why.
func setReadyCondition(s *scope) {
	ok, reason, msg := true, cachev1alpha1.ReasonAsExpected, fmt.Sprintf("%d nodes", len(s.nodes))
	v := policy.CheckPool(s.pool)
	switch {
	case v != nil:
		ok, reason, msg = false, v[0].Reason, v.Err().Error()
	case s.mediaMissing != "":
		ok, reason, msg = false, cachev1alpha1.ReasonMediaUnavailable, s.mediaMissing
	case len(s.nodes) == 0:
		ok, reason, msg = false, cachev1alpha1.ReasonNoNodes, "no node matches the pool's node selector and tolerations"
	}
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.pool.Status.Conditions, metav1.Condition{
		Type: cachev1alpha1.ConditionPoolReady, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: s.pool.Generation,
	})
}

func (r *Reconciler) allPools(ctx context.Context, _ client.Object) []reconcile.Request {
	var list cachev1alpha1.CachePoolList
	if err := r.Client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing pools")
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}

func instanceToPool(_ context.Context, o client.Object) []reconcile.Request {
	inst := o.(*cachev1alpha1.CacheInstance)
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: inst.Spec.Pool}}}
}
