package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/csi-driver/mounter"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// The volume context keys under which kubelet passes the name and the
// namespace of the pod a volume is published for (podInfoOnMount).
const (
	podNameKey      = "csi.storage.k8s.io/pod.name"
	podNamespaceKey = "csi.storage.k8s.io/pod.namespace"
)

// newPublication reads what a publish of an instance of namespace ns asks
// for: the sub-path, whether it is read-only, and the pod it is for. A pod
// of another namespace is refused: the provisioner makes volumes of the
// claim's namespace's instances only, but a static PV that an admin made
// without a claimRef may be bound by a claim of any namespace, whose pods
// would then act on the instance's data as its runAs identity.
func newPublication(req *csi.NodePublishVolumeRequest, ns string) (publication, error) {
	if podNS, ok := req.GetVolumeContext()[podNamespaceKey]; ok && podNS != ns {
		return publication{}, fmt.Errorf("%w: volume %s is an instance of namespace %s, and the pod is in namespace %s",
			ErrInvalid, req.GetVolumeId(), ns, podNS)
	}
	sub, err := cleanSubPath(req.GetVolumeContext()[volume.ContextSubPath])
	if err != nil {
		return publication{}, err
	}
	pub := publication{SubPath: sub, ReadOnly: req.GetReadonly() || readerOnly(req.GetVolumeCapability())}
	if pod := req.GetVolumeContext()[podNameKey]; pod != "" {
		pub.Pod = pod + "/" + volumeName(req.GetTargetPath(), req.GetVolumeId())
	}
	return pub, nil
}

// cleanSubPath returns the sub-path cleaned and relative, or an error for
// one that is absolute or climbs out of the instance.
func cleanSubPath(sub string) (string, error) {
	if sub == "" {
		return "", nil
	}
	if path.IsAbs(sub) {
		return "", fmt.Errorf("%w: %s %q must be relative to the instance's root", ErrInvalid, volume.ContextSubPath, sub)
	}
	for _, part := range strings.Split(sub, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %s %q must not contain \"..\"", ErrInvalid, volume.ContextSubPath, sub)
		}
	}
	if c := path.Clean(sub); c != "." {
		return c, nil
	}
	return "", nil
}

// readerOnly reports whether the access mode lets nobody write.
func readerOnly(c *csi.VolumeCapability) bool {
	switch c.GetAccessMode().GetMode() {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		return true
	}
	return false
}

// volumeName returns the pod's name for the volume: kubelet publishes at
// .../volumes/kubernetes.io~csi/<name>/mount.
func volumeName(target, id string) string {
	if filepath.Base(target) == "mount" {
		return filepath.Base(filepath.Dir(target))
	}
	_, name, _ := strings.Cut(id, "/")
	return name
}

// publish bind-mounts the staged instance, or its sub-path, at target.
func (n *nodeServer) publish(ctx context.Context, ns, name, staging, target string, pub publication) error {
	st, err := loadState(n.volumeDir(ns, name))
	if err != nil {
		return err
	}
	if st == nil || st.Unstaging {
		return fmt.Errorf("%w: volume %s/%s on this node", ErrNotStaged, ns, name)
	}
	if st.Mount.Target != staging {
		return fmt.Errorf("%w: volume %s is staged at %s, not %s", ErrNotStaged, st.VolumeID, st.Mount.Target, staging)
	}
	mounted, err := mounter.Mounted(target)
	if err != nil {
		return err
	}
	if old, ok := st.Targets[target]; ok && mounted {
		if old.SubPath != pub.SubPath || old.ReadOnly != pub.ReadOnly {
			return fmt.Errorf("%w: %s is published with sub-path %q, read-only %t", ErrIncompatible, target, old.SubPath, old.ReadOnly)
		}
		return n.putLease(ctx, ns, name, st.pods())
	}
	if mounted {
		return fmt.Errorf("%w: something else is mounted at %s", ErrIncompatible, target)
	}
	// The record comes first. A plugin that crashes after it finds the
	// target recorded: mounted, and a repeated publish succeeds, or not yet,
	// and a repeated publish binds it. Never a mount it does not know.
	st.Targets[target] = pub
	if err := st.save(); err != nil {
		return err
	}
	if err := bind(staging, pub, target); err != nil {
		delete(st.Targets, target)
		return errors.Join(err, st.save())
	}
	return n.putLease(ctx, ns, name, st.pods())
}

// bind bind-mounts pub's sub-path of staging at target, then remounts the
// bind read-only if asked. The sub-path is resolved inside the FUSE mount
// with RESOLVE_BENEATH, so that a symbolic link in the instance cannot make
// the plugin bind a directory of the host into the pod.
func bind(staging string, pub publication, target string) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	root, err := openStaging(staging)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	sub := pub.SubPath
	if sub == "" {
		sub = "."
	}
	fd, err := unix.Openat2(root, sub, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("%w: %s %q in the instance: %w", ErrInvalid, volume.ContextSubPath, pub.SubPath, err)
	}
	defer unix.Close(fd)
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting at %s: %w", target, err)
	}
	if !pub.ReadOnly {
		return nil
	}
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return errors.Join(fmt.Errorf("remounting %s read-only: %w", target, err), unmountTarget(target))
	}
	return nil
}

// openStaging opens the root of the FUSE mount at staging.
func openStaging(staging string) (int, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(staging, &fs); errors.Is(err, unix.ENOTCONN) {
		return -1, fmt.Errorf("%w: the mount at %s has lost its daemon; it is being remounted", ErrUnavailable, staging)
	}
	root, err := unix.Open(staging, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening staging path: %w", err)
	}
	return root, nil
}

// unpublish unmounts target and drops it from the volume's record.
func (n *nodeServer) unpublish(ctx context.Context, ns, name, target string) error {
	if err := unmountTarget(target); err != nil {
		return err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing target path: %w", err)
	}
	st, err := loadState(n.volumeDir(ns, name))
	if err != nil || st == nil {
		return err
	}
	if _, ok := st.Targets[target]; !ok {
		return nil
	}
	delete(st.Targets, target)
	if err := st.save(); err != nil {
		return err
	}
	return n.putLease(ctx, ns, name, st.pods())
}

// unmountTarget unmounts every mount stacked at target. A bind mount holds
// no data of its own: the FUSE mount at the staging path keeps serving.
func unmountTarget(target string) error {
	for {
		mounted, err := mounter.Mounted(target)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(target, 0); err != nil {
			return fmt.Errorf("unmounting %s: %w", target, err)
		}
	}
}
