package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/csi-driver/mounter"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// health reports whether the volume's daemon runs and its mount answers,
// and if not, why.
func (n *nodeServer) health(ctx context.Context, st *volumeState) (bool, string) {
	running, err := n.opts.Mounter.Running(ctx, st.Mount)
	if err != nil {
		return false, fmt.Sprintf("cannot tell whether the mount daemon runs: %v", err)
	}
	if !running {
		return false, "the FUSE daemon of the mount is gone; it is being remounted"
	}
	if ok, msg := pathMounted(st.Mount.Target); !ok {
		return false, msg
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(st.Mount.Target, &fs); err != nil {
		return false, fmt.Sprintf("the mount at %s does not answer: %v", st.Mount.Target, err)
	}
	return true, "the mount serves"
}

// NodeGetVolumeStats returns the space and inodes of the mount, and its
// condition: abnormal while the FUSE daemon is gone.
func (n *nodeServer) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	ns, name, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, fmt.Errorf("%w: volume path missing", ErrInvalid)
	}
	st, err := loadState(n.volumeDir(ns, name))
	if err != nil {
		return nil, err
	}
	if st == nil || (st.Mount.Target != req.GetVolumePath() && !hasTarget(st, req.GetVolumePath())) {
		return nil, fmt.Errorf("%w: volume %s is not staged or published at %s", ErrNotFound, req.GetVolumeId(), req.GetVolumePath())
	}
	ok, msg := n.health(ctx, st)
	if ok {
		ok, msg = pathMounted(req.GetVolumePath())
	}
	resp := &csi.NodeGetVolumeStatsResponse{VolumeCondition: &csi.VolumeCondition{Abnormal: !ok, Message: msg}}
	var fs unix.Statfs_t
	err = unix.Statfs(req.GetVolumePath(), &fs)
	switch {
	case errors.Is(err, unix.ENOTCONN):
		resp.VolumeCondition = &csi.VolumeCondition{Abnormal: true, Message: "the FUSE daemon of the mount is gone (transport endpoint is not connected)"}
		return resp, nil
	case err != nil:
		return nil, fmt.Errorf("statfs %s: %w", req.GetVolumePath(), err)
	}
	resp.Usage = usage(&fs)
	return resp, nil
}

// pathMounted reports whether the volume is mounted at path: a target is
// not while the watcher replaces its mount, and a statfs of it then reads
// the directory below.
func pathMounted(path string) (bool, string) {
	mounted, err := mounter.Mounted(path)
	if err != nil {
		return false, fmt.Sprintf("cannot tell whether %s is mounted: %v", path, err)
	}
	if !mounted {
		return false, fmt.Sprintf("the volume is not mounted at %s; it is being remounted", path)
	}
	return true, "the mount serves"
}

func hasTarget(st *volumeState, path string) bool {
	_, ok := st.Targets[path]
	return ok
}

// usage converts statfs results to CSI usage in bytes and inodes.
func usage(fs *unix.Statfs_t) []*csi.VolumeUsage {
	bsize := fs.Bsize
	return []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * bsize, Available: int64(fs.Bavail) * bsize,
			Used: int64(fs.Blocks-fs.Bfree) * bsize},
		{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree), Used: int64(fs.Files - fs.Ffree)},
	}
}

// logf returns the logger of a call, which the interceptor puts in ctx.
func logf(ctx context.Context) logr.Logger {
	return logr.FromContextOrDiscard(ctx)
}
