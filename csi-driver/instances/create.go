package instances

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/policy"
)

// Create returns the volume of req, creating a dynamic volume's instance
// if it does not exist yet. It is idempotent for the same request, and
// answers ErrConflict for another request of the same name.
func (m *Instances) Create(ctx context.Context, req Request) (Volume, error) {
	if req.Params.Named() {
		return m.named(ctx, req)
	}
	inst, err := m.build(ctx, req)
	if err != nil {
		return Volume{}, err
	}
	err = m.Client.Create(ctx, inst)
	switch {
	case apierrors.IsAlreadyExists(err):
		return m.existing(ctx, req)
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		// The validating webhook refused what the pool checks here passed,
		// such as a pool changed in between.
		return Volume{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	case err != nil:
		return Volume{}, fmt.Errorf("creating CacheInstance %s/%s: %w", req.Namespace, req.Name, err)
	}
	return newVolume(req.Namespace, req.Name, req.Capacity, req.Params, true), nil
}

// existing answers a creation whose instance exists: a retry of the same
// request, or a conflict.
func (m *Instances) existing(ctx context.Context, req Request) (Volume, error) {
	cur := &cachev1alpha1.CacheInstance{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name}, cur); err != nil {
		return Volume{}, fmt.Errorf("reading CacheInstance %s/%s: %w", req.Namespace, req.Name, err)
	}
	if cur.Annotations[AnnotationRequest] != digest(req) {
		return Volume{}, fmt.Errorf("%w: CacheInstance %s/%s exists and was not made for this request", ErrConflict, req.Namespace, req.Name)
	}
	return newVolume(req.Namespace, req.Name, req.Capacity, req.Params, true), nil
}

// build makes the instance of a dynamic volume and checks it against its
// pool, as the webhook and the reconciler will.
func (m *Instances) build(ctx context.Context, req Request) (*cachev1alpha1.CacheInstance, error) {
	pool := &cachev1alpha1.CachePool{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: req.Params.Pool}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: CachePool %q does not exist", ErrInvalid, req.Params.Pool)
		}
		return nil, fmt.Errorf("reading CachePool %s: %w", req.Params.Pool, err)
	}
	ns := &corev1.Namespace{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: req.Namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", req.Namespace, err)
	}
	inst := newInstance(req)
	if err := fillBacking(inst, pool); err != nil {
		return nil, err
	}
	if err := fillIdentity(inst, pool, ns.Labels, req.Params.RunAsSet); err != nil {
		return nil, err
	}
	return inst, check(policy.Validate(inst, pool, ns.Labels))
}

func newInstance(req Request) *cachev1alpha1.CacheInstance {
	inst := &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace, Annotations: map[string]string{
			AnnotationVolume:  req.Name,
			AnnotationClaim:   req.Namespace + "/" + req.Claim,
			AnnotationRequest: digest(req),
		}},
		Spec: *req.Params.Spec.DeepCopy(),
	}
	inst.Spec.Pool, inst.Spec.Capacity = req.Params.Pool, req.Capacity
	if req.ReclaimPolicy != "" {
		inst.Annotations[AnnotationReclaimPolicy] = req.ReclaimPolicy
	}
	return inst
}

// fillBacking picks the pool's file system when there is just one and the
// request named none.
func fillBacking(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool) error {
	b := inst.Spec.Backing
	if b == nil || b.Filesystem != "" {
		return nil
	}
	if len(pool.Spec.BackingFilesystems) != 1 {
		return fmt.Errorf("%w: CachePool %s has %d backing file systems: set backingFilesystem", ErrInvalid, pool.Name, len(pool.Spec.BackingFilesystems))
	}
	b.Filesystem = pool.Spec.BackingFilesystems[0].Name
	return nil
}

// fillIdentity gives an instance whose request named no identity the one
// identity the pool maps to the namespace for its path.
func fillIdentity(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string, asked bool) error {
	if asked {
		return nil
	}
	id, ok := policy.SoleIdentity(inst, pool, nsLabels)
	if !ok {
		return fmt.Errorf("%w: set runAsUID and runAsGID: CachePool %s maps no single identity to namespace %s for this path",
			ErrInvalid, pool.Name, inst.Namespace)
	}
	inst.Spec.RunAs = id
	return nil
}

// check turns the pool's verdict into an error: ErrNoCapacity when the
// capacity can never fit, ErrInvalid for any other rule.
func check(vs policy.Violations) error {
	err := vs.Err()
	var perr *policy.Error
	if !errors.As(err, &perr) {
		return nil
	}
	for _, v := range perr.Violations {
		if v.Field == "spec.capacity" {
			return fmt.Errorf("%w: %w", ErrNoCapacity, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}
