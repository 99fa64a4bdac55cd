package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
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
	// finds the volume and its secrets, and the watcher mounts it.
	if err := writeSecret(dir, secret); err != nil {
		return err
	}
	if st.Mount.MountKey, err = n.writeMountKey(ctx, spec); err != nil {
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
	if err := n.refreshMountKey(ctx, st); err != nil {
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

// writeMountKey writes the mount key, readable by root only, where the
// daemon's --mount-key-file points, for a mount of an instance whose
// servers act as their callers, and reports whether it did. Without the
// key such servers refuse the mount: a missing key Secret is logged, and
// the mount goes on without, for servers started before there was one.
func (n *nodeServer) writeMountKey(ctx context.Context, spec mounter.Spec) (bool, error) {
	if !spec.PerCaller || n.opts.MountKeySecret.Name == "" {
		return false, nil
	}
	s := &corev1.Secret{}
	if err := n.opts.Client.Get(ctx, n.opts.MountKeySecret, s); err != nil {
		if apierrors.IsNotFound(err) {
			logf(ctx).Info("No mount key: servers that admit only mounts of the node plugin will refuse this one", "secret", n.opts.MountKeySecret, "volume", volume.ID(spec.Namespace, spec.Instance))
			return false, nil
		}
		return false, fmt.Errorf("reading the mount key: %w", err)
	}
	key := s.Data[cachev1alpha1.MountKeySecretKey]
	if len(key) == 0 {
		return false, fmt.Errorf("%w: Secret %s has no %q", ErrUnavailable, n.opts.MountKeySecret, cachev1alpha1.MountKeySecretKey)
	}
	return true, writeRootOnly(filepath.Join(spec.Dir, mounter.MountKeyFile), key, "the mount key")
}

// refreshMountKey writes the current mount key for the next daemon of a
// recorded volume: the key may have been replaced since the stage, or made
// only then, as after an upgrade from a release without mount keys, and
// the servers of an instance that acts as its callers, once made anew,
// admit no mount without it. A key once given is not taken away.
func (n *nodeServer) refreshMountKey(ctx context.Context, st *volumeState) error {
	has, err := n.writeMountKey(ctx, st.Mount)
	if err != nil || !has || st.Mount.MountKey {
		return err
	}
	st.Mount.MountKey = true
	return st.save()
}

// writeSecret writes the data-path secret, readable by root only, where the
// daemon's --secret-file points. It is never put in argv, the environment
// or a volume context, where other users of the node could read it.
func writeSecret(dir, secret string) error {
	return writeRootOnly(filepath.Join(dir, mounter.SecretFile), []byte(secret), "the data secret")
}

// writeRootOnly replaces the file at path with b, readable by root only.
func writeRootOnly(path string, b []byte, what string) error {
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", what, err)
	}
	return os.Rename(path+".tmp", path)
}
