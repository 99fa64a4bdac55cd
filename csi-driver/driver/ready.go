package driver

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// readyPoll is how often NodeStageVolume looks whether an instance became
// Ready.
const readyPoll = 250 * time.Millisecond

// readyInstance returns the instance once it is Ready, waiting for it up to
// MountTimeout: kubelet stages a volume as soon as its claim is bound,
// which for a new dynamic volume is while the instance's servers start. An
// instance that does not exist is ErrNotFound at once; one that failed, is
// being deleted, or is still not Ready when the wait ends is ErrUnavailable,
// and kubelet asks again.
func (n *nodeServer) readyInstance(ctx context.Context, ns, name string) (*cachev1alpha1.CacheInstance, error) {
	ctx, cancel := context.WithTimeout(ctx, n.opts.MountTimeout)
	defer cancel()
	for {
		ci := &cachev1alpha1.CacheInstance{}
		err := n.opts.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ci)
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%w: cache instance %s/%s", ErrNotFound, ns, name)
		case err != nil && ctx.Err() == nil:
			return nil, fmt.Errorf("reading cache instance: %w", err)
		case err == nil && !ci.DeletionTimestamp.IsZero():
			// Its phase stays Ready until the operator's next pass, which
			// a busy or restarting manager may make much later: a mount
			// let in meanwhile would write into a teardown.
			return nil, fmt.Errorf("%w: cache instance %s/%s is being deleted", ErrUnavailable, ns, name)
		case err == nil && ci.Status.Phase == cachev1alpha1.PhaseReady:
			return ci, nil
		case err == nil && ci.Status.Phase == cachev1alpha1.PhaseFailed:
			return nil, notReady(ns, name, ci.Status.Phase)
		}
		select {
		case <-ctx.Done():
			return nil, notReady(ns, name, ci.Status.Phase)
		case <-time.After(readyPoll):
		}
	}
}

func notReady(ns, name string, phase cachev1alpha1.Phase) error {
	return fmt.Errorf("%w: cache instance %s/%s is %q, not Ready", ErrUnavailable, ns, name, phase)
}
