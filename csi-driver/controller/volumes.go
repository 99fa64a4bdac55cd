package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/instances"
	"github.com/burstcache/burstcache/csi-driver/params"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// errDeleting means a volume's instance is still writing its data back.
var errDeleting = errors.New("the volume's CacheInstance is writing its data back before it goes")

// CreateVolume creates the CacheInstance of a dynamic volume, or finds the
// existing instance of a named one.
func (s *controllerServer) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	vol, err := s.createVolume(ctx, req)
	if err != nil {
		return nil, grpcError(ctx, err)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId: vol.ID, CapacityBytes: vol.Capacity.Value(), VolumeContext: vol.Context,
	}}, nil
}

func (s *controllerServer) createVolume(ctx context.Context, req *csi.CreateVolumeRequest) (instances.Volume, error) {
	if req.GetName() == "" {
		return instances.Volume{}, fmt.Errorf("%w: the volume name is missing", instances.ErrInvalid)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return instances.Volume{}, err
	}
	unlock, err := s.locks.lock(req.GetName())
	if err != nil {
		return instances.Volume{}, err
	}
	defer unlock()
	r, err := s.request(ctx, req)
	if err != nil {
		return instances.Volume{}, err
	}
	return s.instances.Create(ctx, r)
}

// request turns a CreateVolume call into an instances.Request, with the
// claim's annotations read from the API server.
func (s *controllerServer) request(ctx context.Context, req *csi.CreateVolumeRequest) (instances.Request, error) {
	p := req.GetParameters()
	ns, name := p[paramPVCNamespace], p[paramPVCName]
	if ns == "" || name == "" {
		return instances.Request{}, fmt.Errorf("%w: parameters %s and %s are missing: run the external-provisioner with --extra-create-metadata",
			instances.ErrInvalid, paramPVCNamespace, paramPVCName)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc)
	if err != nil && !apierrors.IsNotFound(err) {
		return instances.Request{}, fmt.Errorf("reading PVC %s/%s: %w", ns, name, err)
	}
	parsed, err := params.Parse(p, pvc.Annotations)
	if err != nil {
		return instances.Request{}, err
	}
	size, err := capacity(req.GetCapacityRange())
	if err != nil {
		return instances.Request{}, err
	}
	return instances.Request{Name: volume.InstanceName(req.GetName()), Namespace: ns, Claim: name, Capacity: size, Params: parsed}, nil
}

// capacity is the required size, or the limit when only that is set.
func capacity(r *csi.CapacityRange) (resource.Quantity, error) {
	n := r.GetRequiredBytes()
	if n == 0 {
		n = r.GetLimitBytes()
	}
	if n <= 0 {
		return resource.Quantity{}, fmt.Errorf("%w: a burstcache volume needs a capacity", instances.ErrInvalid)
	}
	return *resource.NewQuantity(n, resource.BinarySI), nil
}

// checkCapabilities accepts file system volumes in any access mode: the
// cache is shared by every node that mounts it.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return fmt.Errorf("%w: volume capabilities are missing", instances.ErrInvalid)
	}
	for _, c := range caps {
		if c.GetMount() == nil {
			return fmt.Errorf("%w: burstcache volumes are file systems; block access is not offered", instances.ErrInvalid)
		}
		if c.GetAccessMode() == nil {
			return fmt.Errorf("%w: a volume capability has no access mode", instances.ErrInvalid)
		}
	}
	return nil
}

// DeleteVolume deletes a dynamic volume's instance and succeeds once it is
// gone: its finalizer has written the data back. A volume ID that names no instance is already deleted.
func (s *controllerServer) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, grpcError(ctx, fmt.Errorf("%w: the volume ID is missing", instances.ErrInvalid))
	}
	if _, _, err := volume.ParseID(id); err != nil {
		return &csi.DeleteVolumeResponse{}, nil
	}
	unlock, err := s.locks.lock(id)
	if err != nil {
		return nil, grpcError(ctx, err)
	}
	defer unlock()
	if err := s.deleteInstance(ctx, id); err != nil {
		return nil, grpcError(ctx, err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// deleteWait bounds how long DeleteVolume waits for an instance to write
// its data back and go, when the caller set no earlier deadline; deletePoll
// is how often it looks.
const (
	deleteWait = 2 * time.Minute
	deletePoll = 250 * time.Millisecond
)

// deleteInstance deletes the volume's instance and waits until it is gone,
// so that a DeleteVolume that succeeds means the data is written back. An
// instance still writing back when the wait ends is errDeleting; the caller
// asks again.
func (s *controllerServer) deleteInstance(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, deleteWait)
	defer cancel()
	for {
		gone, err := s.instances.Delete(ctx, id)
		if err != nil || gone {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s", errDeleting, id)
		case <-time.After(deletePoll):
		}
	}
}

// ValidateVolumeCapabilities confirms file system access to an existing
// volume.
func (s *controllerServer) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, grpcError(ctx, fmt.Errorf("%w: the volume ID is missing", instances.ErrInvalid))
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		if len(req.GetVolumeCapabilities()) == 0 {
			return nil, grpcError(ctx, err)
		}
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	if err := s.exists(ctx, req.GetVolumeId()); err != nil {
		return nil, grpcError(ctx, err)
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

func (s *controllerServer) exists(ctx context.Context, id string) error {
	ns, name, err := volume.ParseID(id)
	if err != nil {
		return fmt.Errorf("%w: %w", instances.ErrNotFound, err)
	}
	err = s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cachev1alpha1.CacheInstance{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: CacheInstance %s", instances.ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("reading CacheInstance %s: %w", id, err)
	}
	return nil
}
