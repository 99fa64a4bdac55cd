package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/mounter"
)

// watch rediscovers the staged volumes from the state directory at start,
// then looks at them every interval, remounting those whose FUSE daemon is
// gone, until ctx ends.
func (n *nodeServer) watch(ctx context.Context, interval time.Duration) {
	ctx = logr.NewContext(ctx, n.opts.Logger.WithName("watcher"))
	n.checkAll(ctx, true)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.checkAll(ctx, false)
		}
	}
}

func (n *nodeServer) checkAll(ctx context.Context, first bool) {
	dirs, err := n.stagedVolumes()
	if err != nil {
		logf(ctx).Error(err, "Listing staged volumes failed")
		return
	}
	for _, dir := range dirs {
		n.check(ctx, dir, first)
	}
}

// check remounts the volume recorded in dir if its daemon is gone. A volume
// that another call is working on, or that is being unstaged, is left
// alone. Only a volume found unhealthy is locked, and then read and checked
// again, so that the watcher makes calls wait rarely and never brings back
// a volume unstaged meanwhile.
func (n *nodeServer) check(ctx context.Context, dir string, first bool) {
	st, err := loadState(dir)
	if err != nil || st == nil || st.Unstaging {
		return
	}
	if first {
		logf(ctx).Info("Found staged volume", "volume", st.VolumeID, "target", st.Mount.Target, "published", len(st.Targets))
	}
	if ok, _ := n.health(ctx, st); ok {
		return
	}
	unlock, err := n.locks.lock(st.VolumeID)
	if err != nil {
		return
	}
	defer unlock()
	st, err = loadState(dir)
	if err != nil || st == nil || st.Unstaging {
		return
	}
	if ok, reason := n.health(ctx, st); !ok {
		logf(ctx).Info("Remounting volume", "volume", st.VolumeID, "reason", reason)
		if err := n.remount(ctx, st); err != nil {
			logf(ctx).Error(err, "Remounting volume failed", "volume", st.VolumeID)
		}
	}
}

// remount replaces the mount of a volume whose daemon has ended, and binds
// its targets again. The dead mounts are detached: with the daemon gone they
// hold nothing more to publish, and processes still in them get ENOTCONN
// either way. A daemon that runs but does not answer is not touched.
func (n *nodeServer) remount(ctx context.Context, st *volumeState) error {
	running, err := n.opts.Mounter.Running(ctx, st.Mount)
	if err != nil {
		return err
	}
	if running {
		return fmt.Errorf("the mount daemon of %s runs but its mount does not answer; not replacing it", st.VolumeID)
	}
	n.reportEnd(ctx, st)
	// A plugin that crashed between recording a stage and taking the Lease
	// comes here too: the Lease comes before the mount, always.
	if err := n.putLease(ctx, st.Mount.Namespace, st.Mount.Instance, st.pods()); err != nil {
		return err
	}
	n.refreshServers(ctx, st)
	if err := n.refreshMountKey(ctx, st); err != nil {
		return err
	}
	for target := range st.Targets {
		detach(target)
	}
	detach(st.Mount.Target)
	if err := n.start(ctx, st); err != nil {
		return err
	}
	var errs []error
	for target, pub := range st.Targets {
		if err := bind(st.Mount.Target, pub, target); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reportEnd says how the daemon of a volume ended, as it recorded before
// the next daemon's start clears it: one that did not publish everything
// (killed, say) is a Warning event on the instance too, where its users
// look.
func (n *nodeServer) reportEnd(ctx context.Context, st *volumeState) {
	ended := mounter.ExitStatus(st.Mount.Dir)
	if ended == nil {
		logf(ctx).Info("Mount daemon of volume ended after publishing everything", "volume", st.VolumeID)
		return
	}
	logf(ctx).Error(ended, "Mount daemon of volume ended; anything it had not published is lost", "volume", st.VolumeID)
	n.warn(ctx, st.Mount.Namespace, st.Mount.Instance, cachev1alpha1.ReasonMountLost, "Remount",
		fmt.Sprintf("The FUSE daemon of the mount on node %s ended (%v): what it had not handed to the servers is lost, and processes using the mount got errors. It is mounted again.", n.opts.NodeName, ended))
}

// refreshServers takes the instance's current server endpoints, which
// change when a server pod is replaced. When the instance cannot be read,
// or is not Ready, the recorded ones stay.
func (n *nodeServer) refreshServers(ctx context.Context, st *volumeState) {
	spec, err := n.mountSpec(ctx, st.Mount.Namespace, st.Mount.Instance, st.Mount.Target, st.Mount.Dir)
	if err != nil || slices.Equal(spec.Servers, st.Mount.Servers) {
		return
	}
	logf(ctx).Info("Taking new server endpoints", "volume", st.VolumeID, "servers", spec.Servers)
	st.Mount.Servers = spec.Servers
	if err := st.save(); err != nil {
		logf(ctx).Error(err, "Recording new server endpoints failed", "volume", st.VolumeID)
	}
}

// detach lazily unmounts every mount stacked at dir. Only for mounts whose
// daemon has ended.
func detach(dir string) {
	for range 16 {
		if unix.Unmount(dir, unix.MNT_DETACH) != nil {
			return
		}
	}
}
