package driver

import (
	"context"
	"fmt"
	"os"

	"github.com/burstcache/burstcache/csi-driver/mounter"
)

// unstage stops the instance's mount so that it publishes what it wrote,
// and gives up the mount Lease only once the daemon has ended and said it
// published everything. When it cannot say so, the call fails, the Lease
// stays, and the operator's teardown keeps waiting: a volume that may hold
// unpublished data is never released silently.
func (n *nodeServer) unstage(ctx context.Context, ns, name, staging string) error {
	st, err := loadState(n.volumeDir(ns, name))
	if err != nil {
		return err
	}
	if st == nil {
		return n.unstageUnknown(ctx, ns, name, staging)
	}
	if len(st.Targets) > 0 {
		return fmt.Errorf("%w: volume %s is published at %d targets", ErrStillPublished, st.VolumeID, len(st.Targets))
	}
	if !st.Unstaging {
		running, err := n.opts.Mounter.Running(ctx, st.Mount)
		if err != nil {
			return err
		}
		if !running {
			// A daemon that died is brought back by the watcher; stopping
			// that one is what releases the volume.
			return fmt.Errorf("%w: the mount daemon of %s is not running; it is being remounted", ErrUnavailable, st.VolumeID)
		}
		st.Unstaging = true
		if err := st.save(); err != nil {
			return err
		}
	}
	if err := n.stop(ctx, st); err != nil {
		return err
	}
	if err := n.deleteLease(ctx, ns, name); err != nil {
		return err
	}
	return os.RemoveAll(st.Mount.Dir)
}

// stop asks the daemon to unmount and publish, and waits for its verdict.
func (n *nodeServer) stop(ctx context.Context, st *volumeState) error {
	ctx, cancel := context.WithTimeout(ctx, n.opts.StopTimeout)
	defer cancel()
	logf(ctx).Info("Stopping mount", "volume", st.VolumeID, "target", st.Mount.Target)
	if err := n.opts.Mounter.Stop(ctx, st.Mount); err != nil {
		return fmt.Errorf("unmounting %s: %w; its mount Lease stays until the daemon has published", st.VolumeID, err)
	}
	mounted, err := mounter.Mounted(st.Mount.Target)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("%s is still mounted after its daemon ended", st.Mount.Target)
	}
	return nil
}

// unstageUnknown answers an unstage of a volume the plugin has no record
// of: done, unless something is mounted at the staging path, which the
// plugin did not mount and does not touch.
func (n *nodeServer) unstageUnknown(ctx context.Context, ns, name, staging string) error {
	mounted, err := mounter.Mounted(staging)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("%s is mounted, but no volume %s/%s is recorded there; leaving it alone", staging, ns, name)
	}
	return n.deleteLease(ctx, ns, name)
}
