package controller

import (
	"context"
	"errors"
	"sync"

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

// grpcError makes the gRPC status of an error, at the RPC boundary.
func grpcError(err error) error {
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
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		c = codes.DeadlineExceeded
	default:
		c = codes.Internal
	}
	return status.Error(c, err.Error())
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
