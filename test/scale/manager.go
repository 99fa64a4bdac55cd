package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/burstcache/burstcache/controllers"
	"github.com/burstcache/burstcache/controllers/cacheinstance"
)

// The manager child is this program run again with these variables set.
const (
	managerEnv = "BURSTCACHE_SCALE_MANAGER_KUBECONFIG"
	controlEnv = "BURSTCACHE_SCALE_CONTROL"
)

// runManagerChild runs the operator's controllers as `burstcache manager`
// does, except that every server pod's control API is the one real server
// of the measurement.
func runManagerChild() error {
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(managerEnv))
	if err != nil {
		return err
	}
	// As the manager's Deployment would be configured for a large cluster.
	cfg.QPS, cfg.Burst = 200, 400
	control := os.Getenv(controlEnv)
	if control == "" {
		return errors.New(controlEnv + " is not set")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: controllers.ControllerOptions(),
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = controllers.Setup(ctx, mgr, controllers.Options{Instance: cacheinstance.Options{
		Resolver:      func(context.Context, *corev1.Pod) (string, error) { return control, nil },
		StatsInterval: 10 * time.Second,
	}})
	if err != nil {
		return fmt.Errorf("setting up the controllers: %w", err)
	}
	return mgr.Start(ctx)
}
