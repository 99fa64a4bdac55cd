package cacheinstance

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// CacheClaimName returns the name of the claim that holds server i's cache
// data when the pool's media is a StorageClass.
func CacheClaimName(inst *cachev1alpha1.CacheInstance, i int) string {
	return podName(inst, i) + "-cache"
}

// claimMedia reports whether the pool's servers keep their data on claims
// of a StorageClass rather than in a host path.
func claimMedia(pool *cachev1alpha1.CachePool) bool {
	return pool != nil && pool.Spec.Media.StorageClass != nil
}

// Room a server takes in its cache directory beyond its capacity, as the
// cache server takes it (package engine, which the operator may not
// import): the index reserves 1 KiB per extent and the slots' generation
// numbers take 8 bytes each; the index's own pages, the log of hidden
// names and the file system's journal take some MiB more.
const (
	cacheBytesPerExtent = 1<<10 + 8
	cacheDirSlack       = 16 << 20
)

// CacheClaimSize is the size of the claim of a server of capacity bytes
// with extents of extentSize: what the server allocates when it starts,
// and an eighth more for what the file system keeps of a volume's size for
// itself, which the server, running as runAs, cannot use: ext4 holds back
// 5 % for root and 1-2 % for its metadata, XFS about 1 %. A volume of just
// the capacity fails the server's start with ENOSPC.
func CacheClaimSize(capacity, extentSize int64) resource.Quantity {
	need := capacity + capacity/extentSize*cacheBytesPerExtent + cacheDirSlack
	size := need + need/8
	const mib = 1 << 20
	return *resource.NewQuantity((size+mib-1)/mib*mib, resource.BinarySI)
}

// buildCacheClaim returns the claim of server i: room for the server's
// capacity (CacheClaimSize) of the pool's class. It carries the protection finalizer and no owner
// reference, so that neither a user's delete nor the garbage collector
// removes the data before the teardown write-back ended. The server pod is
// pinned to its node, so a WaitForFirstConsumer class binds a local volume
// of that node.
func buildCacheClaim(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, i int, srv cachev1alpha1.ServerStatus) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: objectMeta(inst, CacheClaimName(inst, i))}
	pvc.Labels[cachev1alpha1.LabelServerIndex] = strconv.Itoa(i)
	pvc.Finalizers = []string{cachev1alpha1.ServerProtectionFinalizer}
	class := pool.Spec.Media.StorageClass.Name
	pvc.Spec = corev1.PersistentVolumeClaimSpec{
		StorageClassName: &class,
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: CacheClaimSize(srv.Capacity.Value(), extentSize(pool))},
		},
	}
	return pvc
}

// loadCacheClaims reads the instance's cache claims, by server index.
func (r *Reconciler) loadCacheClaims(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.listCacheClaims(ctx, s, r.Client)
}

// loadCacheClaimsFresh reads them from the API server, for a teardown, as
// loadServerPodsFresh reads the pods.
func (r *Reconciler) loadCacheClaimsFresh(ctx context.Context, s *scope) (ctrl.Result, error) {
	return r.listCacheClaims(ctx, s, r.APIReader)
}

func (r *Reconciler) listCacheClaims(ctx context.Context, s *scope, reader client.Reader) (ctrl.Result, error) {
	var list corev1.PersistentVolumeClaimList
	err := reader.List(ctx, &list, client.InNamespace(s.inst.Namespace), client.MatchingLabels{
		cachev1alpha1.LabelInstance: s.inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing cache claims: %w", err)
	}
	for i := range list.Items {
		idx, err := strconv.Atoi(list.Items[i].Labels[cachev1alpha1.LabelServerIndex])
		if err == nil {
			s.claims[idx] = &list.Items[i]
		}
	}
	return ctrl.Result{}, nil
}

// ensureCacheClaims creates the claim of every placed server that has
// none, before its pod, and restores the protection of those that lost it.
func (r *Reconciler) ensureCacheClaims(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !claimMedia(s.pool) {
		return ctrl.Result{}, nil
	}
	for i, srv := range s.inst.Status.Servers {
		if pvc := s.claims[i]; pvc != nil {
			if err := r.protect(ctx, pvc); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		lost, err := r.claimLost(ctx, s, i)
		if err != nil {
			return ctrl.Result{}, err
		}
		if lost {
			r.Recorder.Eventf(s.inst, s.pods[i], corev1.EventTypeWarning, cachev1alpha1.ReasonMediaUnavailable, "Provision",
				"The cache claim %s of running server %s is gone; not giving it an empty one", CacheClaimName(s.inst, i), srv.Name)
			continue
		}
		if ok, err := r.mayCreate(ctx, s); !ok || err != nil {
			return staleCopy(s), err
		}
		pvc := buildCacheClaim(s.inst, s.pool, i, srv)
		if err := r.createIfMissing(ctx, s, pvc); err != nil {
			return ctrl.Result{}, err
		}
		s.claims[i] = pvc
	}
	return ctrl.Result{}, nil
}

// claimLost reports whether server i's pod runs while its claim is gone
// (someone forced its finalizer off). The server may have held dirty data
// there, so it must not get a new, empty claim that would hide the loss;
// its pod keeps the old volume mounted, and the teardown can still flush
// it. The API server is asked, not the cache, which may not have seen a
// claim created in the previous pass.
func (r *Reconciler) claimLost(ctx context.Context, s *scope, i int) (bool, error) {
	if s.pods[i] == nil {
		return false, nil
	}
	name := CacheClaimName(s.inst, i)
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.inst.Namespace, Name: name}, &corev1.PersistentVolumeClaim{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading cache claim %s: %w", name, err)
	}
	return apierrors.IsNotFound(err), nil
}

// deleteCacheClaims releases and deletes the cache claims once the
// servers are gone, and waits until the claims are gone too, so that an
// instance of the same name created later never finds this one's data.
func (r *Reconciler) deleteCacheClaims(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, pvc := range s.claims {
		if err := r.releaseAndDelete(ctx, pvc); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(s.claims) > 0 {
		ctrl.LoggerFrom(ctx).Info("Waiting for cache claims to go", "claims", len(s.claims))
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}
