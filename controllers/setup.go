package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/burstcache/burstcache/controllers/cacheinstance"
	"github.com/burstcache/burstcache/controllers/cachepool"
	"github.com/burstcache/burstcache/controllers/metrics"
	"github.com/burstcache/burstcache/controllers/webhooks"
)

// Options configure the operator.
type Options struct {
	// Instance configures the CacheInstance reconciler.
	Instance cacheinstance.Options
	// Webhooks registers the admission webhooks; the manager must then
	// serve its webhook server.
	Webhooks bool
}

// Setup registers the reconcilers, their indexes and, if asked, the
// webhooks with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	inst := &cacheinstance.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("burstcache-cacheinstance"),
		Options:   o.Instance,
	}
	if err := inst.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the CacheInstance controller: %w", err)
	}
	if err := metrics.RegisterInstancePhases(mgr.GetClient()); err != nil {
		return fmt.Errorf("registering the instances-by-phase metric: %w", err)
	}
	if err := (&cachepool.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CachePool controller: %w", err)
	}
	if !o.Webhooks {
		return nil
	}
	if err := (&webhooks.CacheInstance{Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CacheInstance webhooks: %w", err)
	}
	if err := (&webhooks.PodGate{Reader: mgr.GetClient(), Writer: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pod scheduling gate webhook: %w", err)
	}
	return nil
}
