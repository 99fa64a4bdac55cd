package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/burstcache/burstcache/csi-driver/mounter"
)

// Options configure the driver. NodeName, StateDir, Client and Mounter are
// required for the node service.
type Options struct {
	// NodeName is this node's name: the node ID the plugin reports, the
	// holder of its mount Leases, and the node that picks the server of a
	// load-balanced instance.
	NodeName string
	// StateDir holds what the plugin knows of its volumes (one directory per
	// volume, see the package documentation). It must survive a restart of
	// the plugin, and the mount daemons must reach it at the same path.
	StateDir string
	// Client writes the mount Leases; it also reads CacheInstances and
	// CachePools unless Reader is set.
	Client client.Client
	// Reader, if set, reads CacheInstances and CachePools (a cache, say).
	Reader client.Reader
	// MountKeySecret, if its name is set, is the Secret whose
	// cachev1alpha1.MountKeySecretKey the mounts of instances whose servers
	// act as their callers sign with: such servers admit no other client.
	// Client reads it at every stage, so a key made after the plugin
	// started is used. A Secret that is not there gives mounts no key.
	MountKeySecret client.ObjectKey
	// Mounter starts and stops the FUSE daemons.
	Mounter mounter.Mounter
	// Controller, if set, is served too, and the identity service then
	// announces the controller service.
	Controller csi.ControllerServer
	// AnnounceController makes the identity service announce the controller
	// service that another plugin instance of the deployment serves
	// (`burstcache csi controller`): the CSI spec has every instance report
	// the capabilities of the plugin as a whole.
	AnnounceController bool
	// Logger receives the plugin's logs.
	Logger logr.Logger
	// Version is reported as the vendor version.
	Version string
	// MountTimeout bounds how long NodeStageVolume waits for a mount to
	// serve. Default 30s.
	MountTimeout time.Duration
	// StopTimeout bounds how long NodeUnstageVolume waits for a daemon to
	// unmount and publish; past it the call fails and is retried, and the
	// daemon keeps running. Default 2m.
	StopTimeout time.Duration
	// WatchInterval is how often the watcher looks for dead daemons.
	// Default 5s.
	WatchInterval time.Duration
}

func (o *Options) setDefaults() {
	if o.Reader == nil {
		o.Reader = o.Client
	}
	if o.MountTimeout == 0 {
		o.MountTimeout = 30 * time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 2 * time.Minute
	}
	if o.WatchInterval == 0 {
		o.WatchInterval = 5 * time.Second
	}
}

// Driver serves the CSI identity and node services, and a controller
// service if one is given.
type Driver struct {
	opts Options
	node *nodeServer
	grpc *grpc.Server
}

// New returns a driver. It keeps no state of its own in memory beyond
// locks: what it knows of volumes is in opts.StateDir, so a new driver over
// the same directory takes over the mounts of an old one.
func New(opts Options) (*Driver, error) {
	opts.setDefaults()
	if opts.NodeName == "" || opts.StateDir == "" || opts.Client == nil || opts.Mounter == nil {
		return nil, errors.New("node name, state directory, client and mounter are required")
	}
	if err := os.MkdirAll(filepath.Join(opts.StateDir, volumesDir), 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	d := &Driver{opts: opts, node: newNodeServer(opts)}
	d.grpc = grpc.NewServer(grpc.UnaryInterceptor(interceptor(opts.Logger)))
	csi.RegisterIdentityServer(d.grpc, &identityServer{version: opts.Version, controller: opts.Controller != nil || opts.AnnounceController})
	csi.RegisterNodeServer(d.grpc, d.node)
	if opts.Controller != nil {
		csi.RegisterControllerServer(d.grpc, opts.Controller)
	}
	return d, nil
}

// Serve serves the CSI services on lis, and watches the mounts, until ctx
// ends. The mounts stay when it returns.
func (d *Driver) Serve(ctx context.Context, lis net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan struct{})
	go func() { d.node.watch(ctx, d.opts.WatchInterval); close(watched) }()
	go func() { <-ctx.Done(); d.grpc.Stop() }()
	d.opts.Logger.Info("Serving CSI", "address", lis.Addr().String(), "node", d.opts.NodeName)
	err := d.grpc.Serve(lis)
	cancel()
	<-watched
	if ctx.Err() != nil && errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Listen listens on a CSI endpoint, unix:///path or a plain path,
// replacing a socket an earlier plugin left behind.
func Listen(endpoint string) (net.Listener, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok && strings.Contains(endpoint, "://") {
		return nil, fmt.Errorf("endpoint %q: only unix sockets are served", endpoint)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	return net.Listen("unix", path)
}
