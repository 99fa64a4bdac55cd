package instances

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// named returns the volume of an existing instance of the claim's
// namespace. An instance made for another volume is refused: deleting
// either volume would then delete what the other mounts.
func (m *Instances) named(ctx context.Context, req Request) (Volume, error) {
	inst := &cachev1alpha1.CacheInstance{}
	key := client.ObjectKey{Namespace: req.Namespace, Name: req.Params.Instance}
	if err := m.Client.Get(ctx, key, inst); err != nil {
		if apierrors.IsNotFound(err) {
			return Volume{}, fmt.Errorf("%w: CacheInstance %s does not exist in namespace %s", ErrNotFound, key.Name, key.Namespace)
		}
		return Volume{}, fmt.Errorf("reading CacheInstance %s: %w", key, err)
	}
	if owner := inst.Annotations[AnnotationVolume]; owner != "" {
		return Volume{}, fmt.Errorf("%w: CacheInstance %s belongs to volume %s and cannot be mounted by name", ErrInvalid, key, owner)
	}
	if !inst.DeletionTimestamp.IsZero() {
		return Volume{}, fmt.Errorf("%w: CacheInstance %s is being torn down", ErrInvalid, key)
	}
	if inst.Spec.Capacity.Cmp(req.Capacity) < 0 {
		return Volume{}, fmt.Errorf("%w: CacheInstance %s has %s, the claim asks for %s", ErrNoCapacity, key,
			inst.Spec.Capacity.String(), req.Capacity.String())
	}
	return newVolume(req.Namespace, inst.Name, inst.Spec.Capacity, req.Params, false), nil
}

// Delete deletes the instance of a dynamic volume and reports whether it
// is gone; the instance's finalizer writes its data back first, so callers
// keep the volume until Delete reports true. A named volume's instance is
// never deleted: it is gone as far as the volume is concerned.
func (m *Instances) Delete(ctx context.Context, volumeID string) (bool, error) {
	ns, name, err := volume.ParseID(volumeID)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	inst := &cachev1alpha1.CacheInstance{}
	err = m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, inst)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading CacheInstance %s: %w", volumeID, err)
	case inst.Annotations[AnnotationVolume] != name:
		return true, nil
	case !inst.DeletionTimestamp.IsZero():
		return false, nil
	}
	err = m.Client.Delete(ctx, inst, client.Preconditions{UID: &inst.UID})
	if client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("deleting CacheInstance %s: %w", volumeID, err)
	}
	return apierrors.IsNotFound(err), nil
}
