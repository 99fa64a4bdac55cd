package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers"
)

type managerFlags struct {
	metricsAddr, probeAddr, certDir, serverImage string
	mountKeySecret                               string
	webhookPort                                  int
	leaderElect, noWebhooks, noProvisioner       bool
	statsInterval, flushAttemptTimeout           time.Duration
	cert                                         certFlags
	serverPull                                   pullFlags
	serverPodAdmins                              []string
}

func newManagerCmd() *cobra.Command {
	f := &managerFlags{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the Kubernetes operator: CachePool and CacheInstance controllers and webhooks",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runManager(f) },
	}
	f.register(cmd.Flags())
	cmd.AddCommand(newPrepareCacheDirCmd())
	return cmd
}

func (f *managerFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", `Prometheus metrics address ("0" disables)`)
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader, so that several replicas can run with one active")
	fl.IntVar(&f.webhookPort, "webhook-port", 9443, "port of the admission webhook server")
	fl.StringVar(&f.certDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key of the webhook server (default: controller-runtime's)")
	fl.BoolVar(&f.noWebhooks, "disable-webhooks", false, "do not serve the admission webhooks")
	fl.BoolVar(&f.noProvisioner, "disable-provisioner", false, "leave burstcache PVCs to the CSI external-provisioner sidecar and `burstcache csi controller`")
	fl.StringVar(&f.serverImage, "server-image", "burstcache:latest", "image of the cache server pods")
	f.serverPull.register(fl, "server-image", "the cache server image", "in each instance's namespace (server pods run there)")
	fl.DurationVar(&f.statsInterval, "stats-interval", 5*time.Second, "how often instance usage is collected from the servers")
	fl.DurationVar(&f.flushAttemptTimeout, "flush-attempt-timeout", time.Minute, "bound of one blocking flush call at teardown; it is then called again")
	fl.StringSliceVar(&f.serverPodAdmins, "server-pod-admin-groups", []string{"system:masters"},
		"groups whose members may exec into cache server pods, attach to them, add ephemeral containers or change them (no one else but the manager may)")
	fl.StringVar(&f.mountKeySecret, "mount-key-secret", cachev1alpha1.MountKeySecretName,
		"Secret, in $POD_NAMESPACE, of the mount key, made if missing: the servers of instances that act as their callers admit only mounts that sign with it, which the CSI node plugins read (empty: none, and such servers admit whoever can read the instance's Secret)")
	f.cert.register(fl)
}

func runManager(f *managerFlags) error {
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, nil)))
	if err := f.serverPull.validate(); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controllers.CacheOptions(),
		Controller:              controllers.ControllerOptions(),
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "manager.cache.burstcache.io",
		LeaderElectionNamespace: os.Getenv("POD_NAMESPACE"),
		WebhookServer:           webhook.NewServer(webhook.Options{Port: f.webhookPort, CertDir: f.certDir}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if !f.noWebhooks {
		if err := f.cert.provision(ctx, cfg, scheme, mgr, f.certDir); err != nil {
			return err
		}
	}
	return startManager(ctx, mgr, f)
}

func startManager(ctx context.Context, mgr ctrl.Manager, f *managerFlags) error {
	if err := controllers.Setup(ctx, mgr, f.options()); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	ready := healthz.Ping
	if !f.noWebhooks {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// options are the controllers' options the flags give.
func (f *managerFlags) options() controllers.Options {
	opts := controllers.Options{Webhooks: !f.noWebhooks, DisableProvisioner: f.noProvisioner, ServerPodAdminGroups: f.serverPodAdmins}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" && f.mountKeySecret != "" {
		opts.MountKeySecret = client.ObjectKey{Namespace: ns, Name: f.mountKeySecret}
	}
	opts.Instance.ServerImage = f.serverImage
	opts.Instance.ServerImagePullPolicy = f.serverPull.pullPolicy()
	opts.Instance.ServerImagePullSecrets = f.serverPull.pullSecrets()
	opts.Instance.StatsInterval = f.statsInterval
	opts.Instance.FlushAttemptTimeout = f.flushAttemptTimeout
	return opts
}

// newPrepareCacheDirCmd is run by an init container of each cache server
// pod, as root: a host path volume is created owned by root, and the server
// runs as the instance's runAs identity, which must own its cache directory.
func newPrepareCacheDirCmd() *cobra.Command {
	var dir string
	var uid, gid int
	cmd := &cobra.Command{
		Use:    "prepare-cache-dir --path DIR --uid UID --gid GID",
		Short:  "Create a cache server's directory and give it to the server's identity",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			return os.Chown(dir, uid, gid)
		},
	}
	cmd.Flags().StringVar(&dir, "path", "", "the cache directory")
	cmd.Flags().IntVar(&uid, "uid", -1, "owner")
	cmd.Flags().IntVar(&gid, "gid", -1, "group")
	return cmd
}
