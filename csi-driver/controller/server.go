package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/burstcache/burstcache/csi-driver/instances"
)

// Keys the external-provisioner sets with --extra-create-metadata.
const (
	paramPVCName      = "csi.storage.k8s.io/pvc/name"
	paramPVCNamespace = "csi.storage.k8s.io/pvc/namespace"
)

// controllerServer serves the CSI controller service.
type controllerServer struct {
	csi.UnimplementedControllerServer
	client    client.Client
	instances *instances.Instances
	locks     *volumeLocks
}

var _ csi.ControllerServer = (*controllerServer)(nil)

// NewControllerServer returns the controller service, which reads claims,
// pools and namespaces and writes CacheInstances with c.
func NewControllerServer(c client.Client) csi.ControllerServer {
	return &controllerServer{client: c, instances: &instances.Instances{Client: c}, locks: &volumeLocks{held: map[string]bool{}}}
}

// ControllerGetCapabilities offers volume creation and deletion only.
func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		}},
	}}}, nil
}

// grpcError makes the gRPC status of an error, at the RPC boundary, for a
// caller whose context is ctx.
func grpcError(ctx context.Context, err error) error {
	var c codes.Code
	switch {
	case errors.Is(err, instances.ErrInvalid):
		c = codes.InvalidArgument
	case errors.Is(err, instances.ErrNotFound):
		c = codes.NotFound
	case errors.Is(err, instances.ErrNoCapacity):
		c = codes.ResourceExhausted
	case errors.Is(err, instances.ErrConflict):
		c = codes.AlreadyExists
	case errors.Is(err, errBusy):
		c = codes.Aborted
	case errors.Is(err, errDeleting):
		c = codes.Unavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), callerOutOfTime(ctx):
		c = codes.DeadlineExceeded
	default:
		c = codes.Internal
	}
	return status.Error(c, err.Error())
}

// callerOutOfTime reports whether the caller's deadline passed, or was
// about to pass when a call failed: the API client's rate limiter refuses a
// request that would outlast the deadline before it passes, with an error
// that does not say so. It waits out a deadline less than a second away.
func callerOutOfTime(ctx context.Context) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < time.Second {
		<-ctx.Done()
	}
	return ctx.Err() != nil
}

// errBusy is returned for a call on a volume another call is working on.
var errBusy = errors.New("an operation on this volume is in progress")

// volumeLocks lets one call at a time work on a volume; a concurrent one
// answers Aborted, and the caller retries.
type volumeLocks struct {
	mu   sync.Mutex
	held map[string]bool
}

func (l *volumeLocks) lock(name string) (unlock func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[name] {
		return nil, errBusy
	}
	l.held[name] = true
	return func() {
		l.mu.Lock()
		delete(l.held, name)
		l.mu.Unlock()
	}, nil
}
