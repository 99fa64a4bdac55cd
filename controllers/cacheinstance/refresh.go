package cacheinstance

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// refresh reads the instance from the API server rather than the cache.
// The decisions that cannot be taken back, placing servers and recreating
// or deleting them at teardown, must not rest on a cached copy that lags
// behind the status the previous pass wrote.
func (r *Reconciler) refresh(ctx context.Context, s *scope) (ctrl.Result, error) {
	fresh := &cachev1alpha1.CacheInstance{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.inst), fresh)
	if apierrors.IsNotFound(err) {
		s.gone = true
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the instance from the API server: %w", err)
	}
	s.inst, s.original = fresh, fresh.DeepCopy()
	return ctrl.Result{}, nil
}

// mayCreate reports whether this pass may create a server pod or cache
// claim for the instance. Both carry a protection finalizer that only the
// instance's teardown removes, so one created for an instance that is
// already gone would stay forever; and a pass of a live instance may run on
// a cached copy that lags behind its deletion. A live-looking instance is
// therefore read again from the API server, once per pass. A teardown
// restores servers on purpose, and its instance is held by its finalizer.
func (r *Reconciler) mayCreate(ctx context.Context, s *scope) (bool, error) {
	if !s.inst.DeletionTimestamp.IsZero() || s.confirmedLive {
		return true, nil
	}
	fresh := &cachev1alpha1.CacheInstance{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.inst), fresh)
	if apierrors.IsNotFound(err) {
		s.gone = true
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the instance from the API server: %w", err)
	}
	if fresh.UID != s.inst.UID || !fresh.DeletionTimestamp.IsZero() {
		return false, nil
	}
	s.confirmedLive = true
	return true, nil
}

// staleCopy ends a pass that found its copy of the instance behind the API
// server's: the next pass, on the cache's newer copy, tears it down.
func staleCopy(s *scope) ctrl.Result {
	if s.gone {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: time.Second}
}
