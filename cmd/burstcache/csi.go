package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/driver"
	"github.com/burstcache/burstcache/csi-driver/mounter"
	"github.com/burstcache/burstcache/csi-driver/registration"
)

func newCSICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "csi",
		Short: "Run the CSI driver " + cachev1alpha1.DriverName,
	}
	cmd.AddCommand(newCSINodeCmd(), newCSIControllerCmd())
	return cmd
}

type csiNodeFlags struct {
	endpoint, nodeName, stateDir, registrationDir string
	mounter, mountImage, mountNamespace, bin      string
	kubeletDir, mountKeySecret, mountKeyNamespace string
	stopTimeout                                   time.Duration
	controllerService                             bool
	mountPull                                     pullFlags
}

func newCSINodeCmd() *cobra.Command {
	f := &csiNodeFlags{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run the CSI node plugin: mount cache instances on this node and publish them into pods",
		Long: `node serves the CSI identity and node services on --endpoint and registers
with kubelet through --registration-dir. Each staged instance is one FUSE
mount on the node, run by a mount pod (--mounter pod) or a detached process
(--mounter process); either outlives a restart of the plugin, which finds
its mounts again in --state-dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCSINode(cmd.Context(), f) },
	}
	f.register(cmd.Flags())
	return cmd
}

func (f *csiNodeFlags) register(fl *pflag.FlagSet) {
	self, _ := os.Executable()
	fl.StringVar(&f.endpoint, "endpoint", "unix:///var/lib/kubelet/plugins/csi.burstcache.io/csi.sock", "CSI endpoint to serve")
	fl.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "name of this node (default: $NODE_NAME)")
	fl.StringVar(&f.stateDir, "state-dir", "/var/lib/kubelet/plugins/csi.burstcache.io/state", "directory that records the node's volumes; must survive plugin restarts")
	fl.StringVar(&f.registrationDir, "registration-dir", registration.DefaultDir, "kubelet's plugin registration directory; empty disables registration")
	fl.StringVar(&f.mounter, "mounter", "pod", "how FUSE daemons run: pod (a mount pod per instance) or process (a detached process, in the plugin's pid namespace: give its pod hostPID, so that the daemons see their callers' pids)")
	fl.StringVar(&f.mountImage, "mount-image", "", "image of mount pods (--mounter pod)")
	f.mountPull.register(fl, "mount-image", "the mount pods' image", "in --mount-namespace")
	fl.StringVar(&f.mountNamespace, "mount-namespace", os.Getenv("POD_NAMESPACE"), "namespace of mount pods (default: $POD_NAMESPACE)")
	fl.StringVar(&f.bin, "burstcache-bin", self, "burstcache binary of mount processes (--mounter process)")
	fl.StringVar(&f.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "kubelet's directory on the host, shared with mount pods (--mounter pod)")
	fl.StringVar(&f.mountKeySecret, "mount-key-secret", cachev1alpha1.MountKeySecretName, "Secret, in --mount-key-namespace, whose mount key the mounts of instances that act as their callers sign with (the manager's --mount-key-secret); empty: none")
	fl.StringVar(&f.mountKeyNamespace, "mount-key-namespace", os.Getenv("POD_NAMESPACE"), "namespace of --mount-key-secret (default: $POD_NAMESPACE)")
	fl.BoolVar(&f.controllerService, "controller-service", false, "announce the controller service that `burstcache csi controller` serves in this deployment (with the external-provisioner sidecar)")
	fl.DurationVar(&f.stopTimeout, "unstage-timeout", 2*time.Minute, "how long an unstage waits for a mount to publish before failing and being retried")
}

func runCSINode(ctx context.Context, f *csiNodeFlags) error {
	log := logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, nil))
	ctrl.SetLogger(log)
	if err := f.validate(); err != nil {
		return err
	}
	c, err := kubeClient()
	if err != nil {
		return err
	}
	d, err := driver.New(driver.Options{
		NodeName: f.nodeName, StateDir: f.stateDir, Client: c, Mounter: f.newMounter(c), Logger: log,
		Version: version, StopTimeout: f.stopTimeout, AnnounceController: f.controllerService,
		MountKeySecret: f.mountKey(),
	})
	if err != nil {
		return badInput("%w", err)
	}
	lis, err := driver.Listen(f.endpoint)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Serve(ctx, lis) })
	if f.registrationDir != "" {
		reg := &registration.Server{Driver: cachev1alpha1.DriverName, Endpoint: strings.TrimPrefix(f.endpoint, "unix://"), Log: log}
		g.Go(func() error { return reg.Serve(ctx, f.registrationDir) })
	}
	err = g.Wait()
	log.Info("Stopped; the node's mounts keep running")
	return err
}

// mountKey names the Secret of the mount key, or nothing without a
// namespace to look in.
func (f *csiNodeFlags) mountKey() client.ObjectKey {
	if f.mountKeyNamespace == "" {
		return client.ObjectKey{}
	}
	return client.ObjectKey{Namespace: f.mountKeyNamespace, Name: f.mountKeySecret}
}

func (f *csiNodeFlags) validate() error {
	if f.nodeName == "" {
		return badInput("--node-name (or $NODE_NAME) is required")
	}
	switch f.mounter {
	case "process":
		if f.bin == "" {
			return badInput("--burstcache-bin is required with --mounter process")
		}
	case "pod":
		if f.mountImage == "" || f.mountNamespace == "" {
			return badInput("--mount-image and --mount-namespace (or $POD_NAMESPACE) are required with --mounter pod")
		}
		if err := f.mountPull.validate(); err != nil {
			return err
		}
		// Mount pods see the host's kubelet directory only; the secret and
		// the exit records must be where they can reach them.
		if rel, err := filepath.Rel(f.kubeletDir, f.stateDir); err != nil || !filepath.IsLocal(rel) {
			return badInput("--state-dir %s must lie below --kubelet-dir %s with --mounter pod", f.stateDir, f.kubeletDir)
		}
	default:
		return badInput("--mounter %q: want pod or process", f.mounter)
	}
	return nil
}

// newMounter returns the mounter the flags, validated, ask for.
func (f *csiNodeFlags) newMounter(c client.Client) mounter.Mounter {
	if f.mounter == "process" {
		return &mounter.Process{Binary: f.bin}
	}
	return &mounter.Pod{Client: c, Namespace: f.mountNamespace, Image: f.mountImage, KubeletDir: f.kubeletDir,
		PullPolicy: f.mountPull.pullPolicy(), PullSecrets: f.mountPull.pullSecrets(),
		GracePeriod: f.stopTimeout + time.Minute}
}

// kubeClient returns a direct (uncached) client for CacheInstances,
// CachePools, Leases and mount pods.
func kubeClient() (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), cachev1alpha1.AddToScheme(scheme)); err != nil {
		return nil, err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("reaching the API server: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
