package cacheinstance

import (
	"context"
	"fmt"

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
