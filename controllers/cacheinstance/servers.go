package cacheinstance

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/policy"
)

// serverLabels select the server pods of an instance.
func serverLabels(inst *cachev1alpha1.CacheInstance) map[string]string {
	return map[string]string{
		cachev1alpha1.LabelInstance:  inst.Name,
		cachev1alpha1.LabelPool:      inst.Spec.Pool,
		cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
	}
}

// loadServerPods reads the instance's server pods, by index.
func (r *Reconciler) loadServerPods(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.listServerPods(ctx, s, r.Client)
}

// loadServerPodsFresh reads them from the API server, for a teardown: it
// deletes the pods it finds and then lets the instance go, so a pod that a
// pass created just before, and the cache does not show yet, would outlive
// the instance, held forever by its protection finalizer.
func (r *Reconciler) loadServerPodsFresh(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.listServerPods(ctx, s, r.APIReader)
}

func (r *Reconciler) listServerPods(ctx context.Context, s *scope, reader client.Reader) (ctrl.Result, error) {
	var pods corev1.PodList
	err := reader.List(ctx, &pods, client.InNamespace(s.inst.Namespace), client.MatchingLabels{
		cachev1alpha1.LabelInstance: s.inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing server pods: %w", err)
	}
	for i := range pods.Items {
		idx, err := strconv.Atoi(pods.Items[i].Labels[cachev1alpha1.LabelServerIndex])
		if err == nil {
			s.pods[idx] = &pods.Items[i]
		}
	}
	return ctrl.Result{}, nil
}

// allocate places the servers of an instance that has none yet: it checks
// that the pool has the capacity free, then picks distinct nodes with the
// most free capacity. The placement is recorded in status.servers and
// kept for the instance's life, since each server's data lives on its node.
//
// The free capacity is what the other instances' placements, as the cache
// shows them, leave. Placements are therefore made one at a time, and each
// is written at once and waited for in the cache before the next one is
// made: instances created together, reconciled by several workers, would
// otherwise all count the same free space and pile onto one node.
func (r *Reconciler) allocate(ctx context.Context, s *scope) (ctrl.Result, error) {
	if len(s.inst.Status.Servers) > 0 {
		return ctrl.Result{}, nil
	}
	r.placing.Lock()
	defer r.placing.Unlock()
	if res, err := r.refresh(ctx, s); err != nil || s.gone || len(s.inst.Status.Servers) > 0 {
		return res, err
	}
	if !s.inst.DeletionTimestamp.IsZero() {
		// Deleted since the pass began: the next pass tears it down, and
		// there is nothing to place for that.
		return staleCopy(s), nil
	}
	others, err := r.poolInstances(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	a := policy.Allocate(s.inst, s.pool, len(s.nodes))
	free := nodeFree(s, others)
	nodes := pickNodes(s.nodes, free, a.PerServer, a.Servers)
	if len(s.nodes) == 0 || len(nodes) < a.Servers {
		s.noCapacity = policy.Fits(a, totalFree(nodes, free, a.PerServer))
		if s.noCapacity == nil {
			s.noCapacity = policy.Violations{{Reason: cachev1alpha1.ReasonInsufficientCapacity, Field: "spec.capacity",
				Message: fmt.Sprintf("fewer than %d nodes of the pool have %s free", a.Servers, resource.NewQuantity(a.PerServer, resource.BinarySI))}}
		}
		ctrl.LoggerFrom(ctx).Info("Waiting for pool capacity", "servers", a.Servers, "perServer", a.PerServer)
		return ctrl.Result{RequeueAfter: r.Options.StatsInterval * 6}, nil
	}
	for i, node := range nodes {
		s.inst.Status.Servers = append(s.inst.Status.Servers, cachev1alpha1.ServerStatus{
			Name: serverName(i), Pod: podName(s.inst, i), Node: node,
			Capacity: resource.NewQuantity(a.PerServer, resource.BinarySI),
		})
	}
	return ctrl.Result{}, r.recordPlacement(ctx, s)
}

// placementWait bounds how long recordPlacement waits for the cache.
const placementWait = 10 * time.Second

// recordPlacement writes status.servers now rather than with the rest of
// the status at the end of the pass, and waits until the cache shows it,
// so that the next placement counts these servers. A placement the cache
// does not show in time is written all the same; the pass fails and is
// retried, and finds it.
//
// A new instance is marked never Ready in the same write: a teardown that
// finds servers placed must know whether a job can have written to them.
// The patch is made on a copy, so that the pass goes on with the instance
// it read, not one the answer shows deleted meanwhile.
func (r *Reconciler) recordPlacement(ctx context.Context, s *scope) error {
	setNeverReady(s)
	placed := s.inst.DeepCopy()
	if err := r.Client.Status().Patch(ctx, placed, client.MergeFrom(s.original)); err != nil {
		// Not to be written by the end of the pass either: the next pass
		// places the servers again, one at a time.
		s.inst.Status.Servers = nil
		return fmt.Errorf("recording the placement of the servers: %w", err)
	}
	key := client.ObjectKeyFromObject(s.inst)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, placementWait, true, func(ctx context.Context) (bool, error) {
		cur := &cachev1alpha1.CacheInstance{}
		err := r.Client.Get(ctx, key, cur)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && len(cur.Status.Servers) > 0, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("waiting for the cache to show the placement of the servers: %w", err)
	}
	return nil
}

// poolInstances lists the other instances of the pool.
func (r *Reconciler) poolInstances(ctx context.Context, s *scope) ([]cachev1alpha1.CacheInstance, error) {
	var list cachev1alpha1.CacheInstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{PoolIndex: s.pool.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the instances of pool %s: %w", s.pool.Name, err)
	}
	out := list.Items[:0]
	for _, o := range list.Items {
		if o.UID != s.inst.UID {
			out = append(out, o)
		}
	}
	return out, nil
}

// nodeFree returns the free bytes of each node of the pool.
func nodeFree(s *scope, others []cachev1alpha1.CacheInstance) map[string]int64 {
	free := map[string]int64{}
	for _, n := range s.nodes {
		free[n] = s.pool.Spec.Media.CapacityPerNode.Value()
	}
	for _, o := range others {
		for _, srv := range o.Status.Servers {
			if _, ok := free[srv.Node]; ok && srv.Capacity != nil {
				free[srv.Node] -= srv.Capacity.Value()
			}
		}
	}
	return free
}

// pickNodes returns up to n nodes with at least need bytes free, those with
// the most free first (ties by name, so that the choice is stable).
func pickNodes(nodes []string, free map[string]int64, need int64, n int) []string {
	var fit []string
	for _, node := range nodes {
		if free[node] >= need {
			fit = append(fit, node)
		}
	}
	sort.SliceStable(fit, func(i, j int) bool { return free[fit[i]] > free[fit[j]] })
	return fit[:min(n, len(fit))]
}

// totalFree sums what the nodes have free in whole servers of need bytes,
// saturated as the pool's total capacity is.
func totalFree(nodes []string, free map[string]int64, need int64) int64 {
	var sum int64
	for _, n := range nodes {
		sum = policy.AddBytes(sum, max(free[n], 0)/need*need)
	}
	return sum
}

func serverName(i int) string { return fmt.Sprintf("server-%d", i) }

func podName(inst *cachev1alpha1.CacheInstance, i int) string {
	return fmt.Sprintf("%s-server-%d", inst.Name, i)
}
