package driver

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// nodeServer is the CSI node service: it stages a volume as one FUSE mount
// per instance on the node, and publishes it into pods with bind mounts.
// Its handlers check the request, take the volume's lock, and leave the
// work to stage, unstage, publish and unpublish.
type nodeServer struct {
	csi.UnimplementedNodeServer
	opts  Options
	locks *volumeLocks
}

var _ csi.NodeServer = (*nodeServer)(nil)

func newNodeServer(opts Options) *nodeServer {
	return &nodeServer{opts: opts, locks: newVolumeLocks()}
}

// NodeGetInfo returns the node's name as its ID.
func (n *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.opts.NodeName}, nil
}

// NodeGetCapabilities lists staging, volume statistics and volume condition.
func (n *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_VOLUME_CONDITION,
	} {
		caps = append(caps, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeStageVolume mounts the instance at the staging path, or finds it
// mounted there already.
func (n *nodeServer) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	ns, name, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := checkPaths(req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	secret := req.GetSecrets()[cachev1alpha1.DataSecretKey]
	if secret == "" {
		return nil, fmt.Errorf("%w: no %q in the stage secrets: the PersistentVolume must name the instance's data Secret as nodeStageSecretRef", ErrInvalid, cachev1alpha1.DataSecretKey)
	}
	unlock, err := n.locks.lock(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return &csi.NodeStageVolumeResponse{}, n.stage(ctx, ns, name, req.GetStagingTargetPath(), secret)
}

// NodeUnstageVolume stops the instance's mount once it has published what
// it wrote, and only then gives up the mount Lease.
func (n *nodeServer) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	ns, name, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := checkPaths(req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	unlock, err := n.locks.lock(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return &csi.NodeUnstageVolumeResponse{}, n.unstage(ctx, ns, name, req.GetStagingTargetPath())
}

// NodePublishVolume bind-mounts the staged instance, or a sub-path of it,
// at the target path.
func (n *nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	ns, name, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := checkPaths(req.GetStagingTargetPath(), req.GetTargetPath()); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	pub, err := newPublication(req, ns)
	if err != nil {
		return nil, err
	}
	unlock, err := n.locks.lock(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return &csi.NodePublishVolumeResponse{}, n.publish(ctx, ns, name, req.GetStagingTargetPath(), req.GetTargetPath(), pub)
}

// NodeUnpublishVolume unmounts the target path.
func (n *nodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	ns, name, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := checkPaths(req.GetTargetPath()); err != nil {
		return nil, err
	}
	unlock, err := n.locks.lock(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	return &csi.NodeUnpublishVolumeResponse{}, n.unpublish(ctx, ns, name, req.GetTargetPath())
}

// checkPaths checks that the paths a request names are set and absolute.
func checkPaths(paths ...string) error {
	for _, p := range paths {
		if p == "" || p[0] != '/' {
			return fmt.Errorf("%w: path %q: want an absolute path", ErrInvalid, p)
		}
	}
	return nil
}

// checkCapability accepts mount volumes; burstcache serves files, not
// blocks.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return fmt.Errorf("%w: volume capability missing", ErrInvalid)
	}
	if c.GetMount() == nil {
		return fmt.Errorf("%w: only mount volumes are served, not block volumes", ErrInvalid)
	}
	if c.GetAccessMode() == nil {
		return fmt.Errorf("%w: access mode missing", ErrInvalid)
	}
	return nil
}
