package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/mounter"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// defaultExtentSize is the extent size of a pool that does not set one, as
// the CRD defaults it.
const defaultExtentSize = 1 << 20

// stage starts the instance's mount at staging, or checks the one recorded.
func (n *nodeServer) stage(ctx context.Context, ns, name, staging, secret string) error {
	dir := n.volumeDir(ns, name)
	st, err := loadState(dir)
	if err != nil {
		return err
	}
	if st != nil {
		return n.restage(ctx, st, staging, secret)
	}
	spec, err := n.mountSpec(ctx, ns, name, staging, dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st = &volumeState{VolumeID: volume.ID(ns, name), Mount: spec, Targets: map[string]publication{}}
	// The record comes first: after a crash from here on, a restarted plugin
	// finds the volume and its secret, and the watcher mounts it.
	if err := writeSecret(dir, secret); err != nil {
		return err
	}
	if err := st.save(); err != nil {
		return err
	}
	// The Lease comes before the mount, so that there is never a mount the
	// operator does not wait for.
	if err := n.putLease(ctx, ns, name, nil); err != nil {
		return errors.Join(err, n.forget(ctx, st))
	}
	if err := n.start(ctx, st); err != nil {
		// The mount never served, so it holds nothing to publish.
		return errors.Join(err, n.forget(ctx, st))
	}
	return nil
}

// restage answers a repeated stage of a recorded volume.
func (n *nodeServer) restage(ctx context.Context, st *volumeState, staging, secret string) error {
	if st.Mount.Target != staging {
		return fmt.Errorf("%w: volume %s is staged at %s", ErrIncompatible, st.VolumeID, st.Mount.Target)
	}
	if st.Unstaging {
		return fmt.Errorf("%w: volume %s is being unstaged", ErrUnavailable, st.VolumeID)
	}
	if err := writeSecret(st.Mount.Dir, secret); err != nil {
		return err
	}
	if err := n.putLease(ctx, st.Mount.Namespace, st.Mount.Instance, st.pods()); err != nil {
		return err
	}
	if ok, _ := n.health(ctx, st); ok {
		return nil
	}
	return n.remount(ctx, st)
}

// start starts the daemon of a volume and waits until it serves.
func (n *nodeServer) start(ctx context.Context, st *volumeState) error {
	if err := os.MkdirAll(st.Mount.Target, 0o750); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.MountTimeout)
	defer cancel()
	logf(ctx).Info("Starting mount", "volume", st.VolumeID, "target", st.Mount.Target, "servers", st.Mount.Servers)
	if err := n.opts.Mounter.Start(ctx, st.Mount); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", st.VolumeID, st.Mount.Target, err)
	}
	return nil
}

// forget drops a volume whose mount never served: its Lease and its state.
func (n *nodeServer) forget(ctx context.Context, st *volumeState) error {
	if err := n.deleteLease(ctx, st.Mount.Namespace, st.Mount.Instance); err != nil {
		return err
	}
	return os.RemoveAll(st.Mount.Dir)
}

// mountSpec reads the instance and its pool and says how to mount it.
func (n *nodeServer) mountSpec(ctx context.Context, ns, name, staging, dir string) (mounter.Spec, error) {
	ci, err := n.readyInstance(ctx, ns, name)
	if err != nil {
		return mounter.Spec{}, err
	}
	servers, err := endpoints(ci)
	if err != nil {
		return mounter.Spec{}, err
	}
	extent, err := n.extentSize(ctx, ci.Spec.Pool)
	if err != nil {
		return mounter.Spec{}, err
	}
	return mounter.Spec{
		Namespace: ns, Instance: name, Node: n.opts.NodeName, Target: staging, Dir: dir,
		Servers: servers, ExtentSize: extent, LoadBalanced: ci.Spec.AccessMode == cachev1alpha1.AccessModeLoadBalanced,
		ClientCache: ci.Spec.ClientCache != nil && ci.Spec.ClientCache.Enabled,
		// Servers running as root act as each caller.
		PerCaller: ci.Spec.RunAs.UID == 0,
	}, nil
}

// endpoints returns the data addresses of the instance's servers, in index
// order, which is the order of status.servers.
func endpoints(ci *cachev1alpha1.CacheInstance) ([]string, error) {
	if len(ci.Status.Servers) == 0 {
		return nil, fmt.Errorf("%w: cache instance %s/%s lists no servers", ErrUnavailable, ci.Namespace, ci.Name)
	}
	var addrs []string
	for _, s := range ci.Status.Servers {
		if s.Endpoint == "" {
			return nil, fmt.Errorf("%w: server %s of cache instance %s/%s has no endpoint yet", ErrUnavailable, s.Name, ci.Namespace, ci.Name)
		}
		addrs = append(addrs, s.Endpoint)
	}
	return addrs, nil
}

// extentSize returns the extent size of the pool.
func (n *nodeServer) extentSize(ctx context.Context, pool string) (int64, error) {
	cp := &cachev1alpha1.CachePool{}
	if err := n.opts.Reader.Get(ctx, client.ObjectKey{Name: pool}, cp); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("%w: cache pool %s", ErrNotFound, pool)
		}
		return 0, fmt.Errorf("reading cache pool: %w", err)
	}
	if cp.Spec.ExtentSize == nil {
		return defaultExtentSize, nil
	}
	return cp.Spec.ExtentSize.Value(), nil
}

// writeSecret writes the data-path secret, readable by root only, where the
// daemon's --secret-file points. It is never put in argv, the environment
// or a volume context, where other users of the node could read it.
func writeSecret(dir, secret string) error {
	path := filepath.Join(dir, mounter.SecretFile)
	if err := os.WriteFile(path+".tmp", []byte(secret), 0o600); err != nil {
		return fmt.Errorf("writing the data secret: %w", err)
	}
	return os.Rename(path+".tmp", path)
}
