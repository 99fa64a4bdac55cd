package cacheinstance

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Ports of the cache server container.
const (
	// DataPort serves the data-path protocol to mounts.
	DataPort = 7070
	// ControlPort serves the control API (flush, stats, tunables, readyz).
	ControlPort = 7071
)

// Resolver returns the control API address ("host:port") of a server pod.
// Implementations must not modify the pod.
type Resolver func(ctx context.Context, pod *corev1.Pod) (string, error)

// PodIPResolver reaches a server at its pod IP and the control port.
func PodIPResolver(_ context.Context, pod *corev1.Pod) (string, error) {
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("server pod %s has no IP yet", pod.Name)
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(ControlPort)), nil
}

// Options configure the reconciler. Zero fields take the defaults of
// (*Options).complete.
type Options struct {
	// ServerImage is the container image that runs `burstcache server`.
	ServerImage string
	// ServerImagePullPolicy is the pull policy of ServerImage; default
	// IfNotPresent, so that a tag such as latest is not pulled again for
	// every server, and an image loaded onto the nodes without a registry
	// is used.
	ServerImagePullPolicy corev1.PullPolicy
	// ServerImagePullSecrets name the Secrets that pull ServerImage. Server
	// pods live in their instance's namespace, and so must these Secrets.
	ServerImagePullSecrets []corev1.LocalObjectReference
	// MountPublicKey, if set, is the public half of the mount key (package
	// mountkey): the servers of instances that act as their callers admit
	// only mounts that sign with its private half.
	MountPublicKey string
	// ServerRequests are the resource requests of a server container.
	ServerRequests corev1.ResourceList
	// Resolver finds a server's control API; default PodIPResolver.
	Resolver Resolver
	// StatsInterval is how often usage is collected from the servers.
	StatsInterval time.Duration
	// FlushAttemptTimeout bounds one blocking Flush call at teardown; a
	// flush that takes longer is called again, which is idempotent.
	FlushAttemptTimeout time.Duration
	// RequestAttemptTimeout bounds one attempt at a user hint on one
	// server; an attempt that takes longer is retried. Default 10m.
	RequestAttemptTimeout time.Duration
	// PreloadAttemptTimeout bounds the copy-up of one path of spec.preload
	// on one server, which runs in the background however long it takes
	// up to this; a copy-up that takes longer is started again, going
	// quickly over what is cached already. Default 6h.
	PreloadAttemptTimeout time.Duration
	// CallTimeout bounds the other control API calls.
	CallTimeout time.Duration
	// MaxConcurrentReconciles is how many instances are reconciled at once;
	// a blocking flush holds one worker for up to FlushAttemptTimeout.
	// Default 4.
	MaxConcurrentReconciles int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (o *Options) complete() {
	if o.ServerImage == "" {
		o.ServerImage = "burstcache:latest"
	}
	if o.ServerImagePullPolicy == "" {
		o.ServerImagePullPolicy = corev1.PullIfNotPresent
	}
	if o.ServerRequests == nil {
		o.ServerRequests = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("250m"),
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		}
	}
	if o.Resolver == nil {
		o.Resolver = PodIPResolver
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = 5 * time.Second
	}
	if o.FlushAttemptTimeout == 0 {
		o.FlushAttemptTimeout = time.Minute
	}
	if o.RequestAttemptTimeout == 0 {
		o.RequestAttemptTimeout = 10 * time.Minute
	}
	if o.PreloadAttemptTimeout == 0 {
		o.PreloadAttemptTimeout = 6 * time.Hour
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 5 * time.Second
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}
