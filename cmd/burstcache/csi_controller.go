package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/protosanitizer"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/controller"
)

func newCSIControllerCmd() *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "controller --endpoint unix:///csi/csi.sock",
		Short: "Serve the CSI identity and controller services, for the external-provisioner sidecar",
		Long: `Serve the CSI identity and controller services on --endpoint, for deployments
that run the external-provisioner sidecar (with --extra-create-metadata) instead
of the manager's in-process provisioner; run the manager with
--disable-provisioner then.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCSIController(cmd.Context(), endpoint) },
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "unix:///csi/csi.sock", "gRPC endpoint: unix:///path or tcp://host:port")
	return cmd
}

func runCSIController(ctx context.Context, endpoint string) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	c, err := newAPIClient()
	if err != nil {
		return err
	}
	lis, err := listenEndpoint(endpoint)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls(log)))
	csi.RegisterIdentityServer(srv, controller.NewIdentityServer(version))
	csi.RegisterControllerServer(srv, controller.NewControllerServer(c))
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() { <-ctx.Done(); srv.GracefulStop() }()
	log.Info("Serving the CSI controller service", "endpoint", endpoint)
	if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving %s: %w", endpoint, err)
	}
	return nil
}

func newAPIClient() (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("finding the cluster: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// listenEndpoint listens on a CSI endpoint; a stale unix socket of an
// earlier run is removed first.
func listenEndpoint(endpoint string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		path := strings.TrimPrefix(endpoint, "unix://")
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing the old socket %s: %w", path, err)
		}
		return net.Listen("unix", path)
	case strings.HasPrefix(endpoint, "tcp://"):
		return net.Listen("tcp", strings.TrimPrefix(endpoint, "tcp://"))
	}
	return nil, badInput("--endpoint %q: want unix:///path or tcp://host:port", endpoint)
}

// logCalls logs every call and its outcome, with secrets stripped.
func logCalls(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		log.Info("Serving a CSI call", "method", info.FullMethod, "request", protosanitizer.StripSecrets(req).String())
		resp, err := handler(ctx, req)
		if err != nil {
			log.Info("CSI call failed", "method", info.FullMethod, "error", err.Error())
		}
		return resp, err
	}
}
