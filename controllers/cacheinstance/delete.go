package cacheinstance

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// reconcileDelete tears an instance down in DataWarp's order: wait until no
// pod mounts it, write every dirty byte back (unless the user chose to drop
// it), delete the servers, their cache claims and then their data secret, and only then let
// the instance go.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if res, err := r.refresh(ctx, s); err != nil || s.gone {
		return res, err
	}
	if !controllerutil.ContainsFinalizer(s.inst, cachev1alpha1.Finalizer) {
		s.gone = true
		return ctrl.Result{}, nil
	}
	// A preload that still runs would go on copying up data the teardown
	// is about to drop, on the disks and the backing file system the
	// flush needs.
	r.preloads.Drop(string(s.inst.UID))
	return runPhases(ctx, s, []phaseFunc{
		r.loadServerPodsFresh,
		r.loadCacheClaimsFresh,
		r.restoreServers,
		r.observeServers,
		r.waitForUnmount,
		r.flush,
		r.deleteServers,
		r.deleteCacheClaims,
		r.deleteSecret,
		r.removeFinalizer,
	})
}

// restoreServers brings back, on their nodes, server pods that went away
// while their data is not written back yet, such as a pod deleted by hand:
// the new pod's server finds the cache directory and resumes. An instance
// that was never Ready holds no data to write back (see flush), so its
// servers are not brought back: one that could never be created would
// hold the teardown for ever.
func (r *Reconciler) restoreServers(ctx context.Context, s *scope) (ctrl.Result, error) {
	if flushDone(s.inst) || s.inst.Status.NeverReady {
		return ctrl.Result{}, nil
	}
	if _, err := r.loadPool(ctx, s); err != nil || s.pool == nil {
		return ctrl.Result{}, err
	}
	if _, err := r.ensureSecret(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if _, err := r.ensureCacheClaims(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return r.ensurePods(ctx, s)
}

// waitForUnmount holds the teardown while pods or nodes mount the instance:
// their clients push their dirty data to the servers at unmount, so a flush
// before that would miss it. It waits in particular until no node plugin
// holds a mount Lease of the instance, since a staged node may hold data
// after its pods ended.
func (r *Reconciler) waitForUnmount(ctx context.Context, s *scope) (ctrl.Result, error) {
	if _, err := r.observeMounts(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.findUnreadyMount(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if n := len(s.inst.Status.ActiveMounts); n > 0 {
		ctrl.LoggerFrom(ctx).Info("Waiting for pods and nodes to unmount before the write-back", "mounts", n)
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// deleteServers releases and deletes the server pods, their Service and
// PodDisruptionBudget, and waits until the pods are gone.
func (r *Reconciler) deleteServers(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, pod := range s.pods {
		if err := r.releaseAndDelete(ctx, pod); err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, o := range []client.Object{&corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		o.SetNamespace(s.inst.Namespace)
		o.SetName(ServiceName(s.inst))
		if err := r.Client.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("deleting %T %s: %w", o, o.GetName(), err)
		}
	}
	if len(s.pods) > 0 {
		ctrl.LoggerFrom(ctx).Info("Waiting for server pods to go", "pods", len(s.pods))
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// removeFinalizer lets the instance go. It is the last step: every server
// is gone and its data written back or knowingly dropped.
func (r *Reconciler) removeFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	patch := client.MergeFrom(s.inst.DeepCopy())
	controllerutil.RemoveFinalizer(s.inst, cachev1alpha1.Finalizer)
	if err := r.Client.Patch(ctx, s.inst, patch); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing the teardown finalizer: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Teardown finished")
	s.gone = true
	return ctrl.Result{}, nil
}
