package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/policy"
)

// +kubebuilder:webhook:path=/mutate-cache-burstcache-io-v1alpha1-cacheinstance,mutating=true,failurePolicy=fail,sideEffects=None,groups=cache.burstcache.io,resources=cacheinstances,verbs=create;update,versions=v1alpha1,name=mcacheinstance-v1alpha1.cache.burstcache.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-cache-burstcache-io-v1alpha1-cacheinstance,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.burstcache.io,resources=cacheinstances,verbs=create;update,versions=v1alpha1,name=vcacheinstance-v1alpha1.cache.burstcache.io,admissionReviewVersions=v1

// CacheInstance is the defaulting and validating webhook of CacheInstances.
// It reads pools and namespaces with Reader, which should be the API server
// itself (the manager's APIReader), so that a pool just changed is seen.
type CacheInstance struct {
	// Reader reads CachePools and Namespaces.
	Reader client.Reader
}

var (
	_ admission.Defaulter[*cachev1alpha1.CacheInstance] = (*CacheInstance)(nil)
	_ admission.Validator[*cachev1alpha1.CacheInstance] = (*CacheInstance)(nil)
)

// SetupWithManager registers both webhooks with mgr's webhook server.
func (w *CacheInstance) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &cachev1alpha1.CacheInstance{}).
		WithDefaulter(w).
		WithValidator(w).
		Complete()
}

// Default fills the knobs the instance leaves unset from its pool's
// defaults. A missing pool is left for the validating webhook to refuse.
// An update that changes the spec beyond its teardown gets its knobs
// filled too, from the pool as it is now: a knob taken out of the spec is
// then the pool's default (or ceiling) again, as the API says, rather than
// the server's default or no limit at all. The teardown timeout is left as
// the user wrote it: a timeout the pool added since would drop data the
// user was promised kept. Other updates (metadata, the teardown alone, an
// instance being deleted) are left alone: the controller's own patches
// never change a knob, and a change of the teardown stays one the pool
// does not govern (see governedChange).
func (w *CacheInstance) Default(ctx context.Context, inst *cachev1alpha1.CacheInstance) error {
	fill := policy.Default
	if req, err := admission.RequestFromContext(ctx); err == nil && req.Operation == admissionv1.Update {
		governed, err := governedUpdate(req, inst)
		if err != nil || !governed || !inst.DeletionTimestamp.IsZero() {
			return err
		}
		fill = policy.DefaultKnobs
	}
	pool, err := w.pool(ctx, inst)
	if err != nil || pool == nil {
		return err
	}
	fill(inst, pool)
	return nil
}

// governedUpdate reports whether the update req changes the spec of inst
// beyond its teardown.
func governedUpdate(req admission.Request, inst *cachev1alpha1.CacheInstance) (bool, error) {
	old := &cachev1alpha1.CacheInstance{}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return false, apierrors.NewBadRequest(fmt.Sprintf("decoding the old CacheInstance: %v", err))
	}
	return governedChange(old, inst), nil
}

// ValidateCreate refuses an instance its pool does not allow, or one that
// does not fit the pool's free capacity now.
func (w *CacheInstance) ValidateCreate(ctx context.Context, inst *cachev1alpha1.CacheInstance) (admission.Warnings, error) {
	if err := checkRequest(nil, inst); err != nil {
		return nil, err
	}
	vs, pool, err := w.check(ctx, inst)
	if err != nil {
		return nil, err
	}
	if vs == nil && pool != nil && pool.Status.FreeCapacity != nil {
		a := policy.Allocate(inst, pool, len(pool.Status.Nodes))
		vs = policy.Fits(a, pool.Status.FreeCapacity.Value())
	}
	return nil, toStatusError(inst, vs)
}

// ValidateUpdate checks the instance again when its spec changes: mutable
// knobs must stay within the ceilings, and a new user hint must stay inside
// the instance. Immutable fields are guarded by the CRD schema. An instance
// being deleted is let through, so that its finalizer can always be removed,
// but for a new user hint, which no pass would run.
func (w *CacheInstance) ValidateUpdate(ctx context.Context, old, inst *cachev1alpha1.CacheInstance) (admission.Warnings, error) {
	if !inst.DeletionTimestamp.IsZero() {
		return nil, checkRequestWhileDeleting(old, inst)
	}
	if err := checkRequest(old, inst); err != nil {
		return nil, err
	}
	if err := checkPreloadChange(old, inst); err != nil {
		return nil, err
	}
	if !governedChange(old, inst) {
		return nil, nil
	}
	vs, _, err := w.check(ctx, inst)
	if err != nil {
		return nil, err
	}
	return nil, toStatusError(inst, vs)
}

// governedChange reports whether an update changes the spec beyond its
// teardown policy, which the user may change at any time. Only such a
// change is checked against the pool again: an instance its pool no longer
// allows must still take requests (flush before it goes), labels, and a
// teardown policy, or nobody could steer it out; the reconciler reports
// what the pool refuses.
func governedChange(old, inst *cachev1alpha1.CacheInstance) bool {
	a, b := old.Spec.DeepCopy(), inst.Spec.DeepCopy()
	a.Teardown, b.Teardown = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

// ValidateDelete allows every deletion; the finalizer guards the data.
func (w *CacheInstance) ValidateDelete(context.Context, *cachev1alpha1.CacheInstance) (admission.Warnings, error) {
	return nil, nil
}

func (w *CacheInstance) check(ctx context.Context, inst *cachev1alpha1.CacheInstance) (policy.Violations, *cachev1alpha1.CachePool, error) {
	pool, err := w.pool(ctx, inst)
	if err != nil {
		return nil, nil, err
	}
	ns := &corev1.Namespace{}
	if err := w.Reader.Get(ctx, client.ObjectKey{Name: inst.Namespace}, ns); err != nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("reading namespace %s: %w", inst.Namespace, err))
	}
	return policy.Validate(inst, pool, ns.Labels), pool, nil
}

// pool returns the instance's pool, or nil if it does not exist.
func (w *CacheInstance) pool(ctx context.Context, inst *cachev1alpha1.CacheInstance) (*cachev1alpha1.CachePool, error) {
	pool := &cachev1alpha1.CachePool{}
	err := w.Reader.Get(ctx, client.ObjectKey{Name: inst.Spec.Pool}, pool)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("reading CachePool %s: %w", inst.Spec.Pool, err))
	}
	return pool, nil
}

// toStatusError turns violations into an Invalid error whose causes name
// each field, rule and reason.
func toStatusError(inst *cachev1alpha1.CacheInstance, vs policy.Violations) error {
	if len(vs) == 0 {
		return nil
	}
	var errs field.ErrorList
	for _, v := range vs {
		errs = append(errs, field.Forbidden(field.NewPath(v.Field), v.Message+" ("+v.Reason+")"))
	}
	return apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("CacheInstance").GroupKind(), inst.Name, errs)
}

// checkPreloadChange refuses a change of spec.preload once the preload is
// done: spec.preload is copied up once, before the instance turns Ready,
// so a change then would be accepted and never run.
func checkPreloadChange(old, inst *cachev1alpha1.CacheInstance) error {
	if slices.Equal(old.Spec.Preload, inst.Spec.Preload) ||
		!meta.IsStatusConditionTrue(old.Status.Conditions, cachev1alpha1.ConditionPreloaded) {
		return nil
	}
	return apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("CacheInstance").GroupKind(), inst.Name, field.ErrorList{
		field.Forbidden(field.NewPath("spec", "preload"), "the preload is done (condition Preloaded) and is not run again: "+
			"copy more up with kubectl burstcache preload "+inst.Name+" PATH"),
	})
}
