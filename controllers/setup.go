package controllers

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"

	"github.com/burstcache/burstcache/controllers/cacheinstance"
	"github.com/burstcache/burstcache/controllers/cachepool"
	"github.com/burstcache/burstcache/controllers/metrics"
	"github.com/burstcache/burstcache/controllers/mountkey"
	"github.com/burstcache/burstcache/controllers/webhooks"
	"github.com/burstcache/burstcache/csi-driver/provisioner"
)

// Options configure the operator.
type Options struct {
	// Instance configures the CacheInstance reconciler.
	Instance cacheinstance.Options
	// Webhooks registers the admission webhooks; the manager must then
	// serve its webhook server.
	Webhooks bool
	// DisableProvisioner leaves burstcache PVCs to the CSI
	// external-provisioner sidecar and `burstcache csi controller`; by
	// default the manager provisions them in-process.
	DisableProvisioner bool
	// Provisioner configures the in-process provisioner.
	Provisioner provisioner.Options
	// ServerPodAdminGroups may exec into cache server pods and change them
	// (webhooks.ServerPodGuard); system:masters if nil.
	ServerPodAdminGroups []string
	// MountKeySecret, if its name is set, is the Secret of the mount key
	// (package mountkey), made if it is missing: the servers of instances
	// that act as their callers admit only mounts that sign with it.
	MountKeySecret client.ObjectKey
}

// Setup registers the reconcilers, their indexes and, if asked, the
// webhooks with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	if o.MountKeySecret.Name != "" {
		pub, err := mountkey.Ensure(ctx, mgr.GetAPIReader(), mgr.GetClient(), o.MountKeySecret)
		if err != nil {
			return err
		}
		o.Instance.MountPublicKey = pub
	}
	inst := &cacheinstance.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  cacheinstance.BoundedRecorder(mgr.GetEventRecorder("burstcache-cacheinstance")),
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
	if !o.DisableProvisioner {
		p := &provisioner.Provisioner{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Recorder: cacheinstance.BoundedRecorder(mgr.GetEventRecorder("burstcache-provisioner")), Options: o.Provisioner,
		}
		if err := p.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the provisioner: %w", err)
		}
	}
	if !o.Webhooks {
		return nil
	}
	if err := (&webhooks.CacheInstance{Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CacheInstance webhooks: %w", err)
	}
	if err := (&webhooks.PoolGuard{Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CachePool guard: %w", err)
	}
	if err := (&webhooks.NamespaceGuard{Reader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the namespace deletion guard: %w", err)
	}
	if err := (&webhooks.PodGate{Reader: mgr.GetClient(), Writer: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the pod scheduling gate webhook: %w", err)
	}
	return setupServerPodGuard(ctx, mgr, o)
}

func setupServerPodGuard(ctx context.Context, mgr ctrl.Manager, o Options) error {
	self, err := webhooks.ManagerUserName(ctx, mgr.GetClient())
	if err != nil {
		return fmt.Errorf("setting up the server pod guard: %w", err)
	}
	admins := o.ServerPodAdminGroups
	if admins == nil {
		admins = []string{"system:masters"}
	}
	return (&webhooks.ServerPodGuard{Reader: mgr.GetClient(), Manager: self, AdminGroups: admins}).SetupWithManager(mgr)
}

// ControllerOptions are the controller settings of the operator's manager.
// They turn off controller-runtime's priority queue (on by default since
// v0.23): in v0.24 it can deadlock when the manager stops (a ready item
// handed to a worker that already left, with the queue's lock held,
// kubernetes-sigs/controller-runtime#3538), which hangs a manager on its
// way out, as in a rolling update. The plain rate-limited queue does not.
func ControllerOptions() config.Controller {
	off := false
	return config.Controller{UsePriorityQueue: &off}
}

// CacheOptions are the manager cache settings the operator needs: of the
// Leases, which every node renews every few seconds, it caches and watches
// only the CSI node plugins' mount Leases.
func CacheOptions() cache.Options {
	mounts := labels.SelectorFromSet(labels.Set{cachev1alpha1.LabelComponent: cachev1alpha1.ComponentMount})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Label: mounts},
	}}
}
