package webhooks

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/policy"
)

// +kubebuilder:webhook:path=/validate-cache-burstcache-io-v1alpha1-cachepool,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.burstcache.io,resources=cachepools,verbs=update;delete,versions=v1alpha1,name=vcachepool-v1alpha1.cache.burstcache.io,admissionReviewVersions=v1

// PoolGuard keeps the parts of a CachePool that running cache servers
// depend on while instances use the pool. A server keeps its extents, dirty
// data included, under the pool's media, cut at the pool's extent size; a
// server pod that is replaced (deleted by hand, evicted, its node
// rebooted) is rebuilt from the pool. With the media moved it would start
// empty and the teardown would find nothing to write back, leaving the
// dirty data stranded where the old server kept it; with another extent
// size it would refuse its own cache directory, and new mounts would refuse
// the running servers. A pool deleted under its instances fails them all
// and leaves no way to bring back a server that went.
//
// Changes of anything else (nodes, capacity, access rules, defaults,
// ceilings) are let through: the reconciler checks the instances against
// them again.
type PoolGuard struct {
	// Reader lists CacheInstances; the API server itself (the manager's
	// APIReader), so that an instance created a moment ago is seen.
	Reader client.Reader
}

var _ admission.Validator[*cachev1alpha1.CachePool] = (*PoolGuard)(nil)

// SetupWithManager registers the webhook with mgr's webhook server.
func (g *PoolGuard) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &cachev1alpha1.CachePool{}).WithValidator(g).Complete()
}

// ValidateCreate allows every new pool; the webhook is not called for it.
func (g *PoolGuard) ValidateCreate(context.Context, *cachev1alpha1.CachePool) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate refuses to move the media or change the extent size of a
// pool while servers of its instances hold data there, and to remove or
// change how servers reach a backing file system while servers of
// instances caching it hold data: a server pod rebuilt from the changed
// pool would write its dirty data back into another file system, or find
// none to write it to. Access rules may change at any time; the reconciler
// refuses the instances they no longer allow.
func (g *PoolGuard) ValidateUpdate(ctx context.Context, old, pool *cachev1alpha1.CachePool) (admission.Warnings, error) {
	if !pool.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	var errs field.ErrorList
	refuse := func(f *field.Path, what string, match func(*cachev1alpha1.CacheInstance) bool) error {
		users, err := g.instances(ctx, pool.Name, match)
		if len(users) > 0 {
			errs = append(errs, field.Forbidden(f, fmt.Sprintf(
				"cannot change while instances of the pool hold servers (%s): %s; "+
					"create a new pool, or change it once those instances are deleted", strings.Join(users, ", "), what)))
		}
		return err
	}
	for _, f := range changedServerFields(old, pool) {
		if err := refuse(f, "their servers keep their data there", policy.Allocated); err != nil {
			return nil, err
		}
	}
	for _, name := range changedFilesystems(old, pool) {
		caching := func(inst *cachev1alpha1.CacheInstance) bool {
			return policy.Allocated(inst) && inst.Spec.Backing != nil && inst.Spec.Backing.Filesystem == name
		}
		f := field.NewPath("spec", "backingFilesystems").Key(name)
		if err := refuse(f, "their servers write their dirty data back through it", caching); err != nil {
			return nil, err
		}
	}
	if len(errs) == 0 {
		return nil, nil
	}
	return nil, apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("CachePool").GroupKind(), pool.Name, errs)
}

// ValidateDelete refuses to delete a pool that instances use.
func (g *PoolGuard) ValidateDelete(ctx context.Context, pool *cachev1alpha1.CachePool) (admission.Warnings, error) {
	users, err := g.instances(ctx, pool.Name, func(*cachev1alpha1.CacheInstance) bool { return true })
	if err != nil || len(users) == 0 {
		return nil, err
	}
	return nil, apierrors.NewForbidden(cachev1alpha1.GroupVersion.WithResource("cachepools").GroupResource(), pool.Name, fmt.Errorf(
		"CacheInstances use it (%s): their servers could not be replaced and their data not be written back without it. "+
			"Delete them first, which writes their data back", strings.Join(users, ", ")))
}

// changedServerFields returns the fields the servers depend on that differ
// between old and pool.
func changedServerFields(old, pool *cachev1alpha1.CachePool) []*field.Path {
	var out []*field.Path
	media := field.NewPath("spec", "media")
	o, n := old.Spec.Media, pool.Spec.Media
	if (o.HostPath == nil) != (n.HostPath == nil) || (o.HostPath != nil && o.HostPath.Path != n.HostPath.Path) {
		out = append(out, media.Child("hostPath"))
	}
	if (o.StorageClass == nil) != (n.StorageClass == nil) || (o.StorageClass != nil && o.StorageClass.Name != n.StorageClass.Name) {
		out = append(out, media.Child("storageClass"))
	}
	if extentSize(old) != extentSize(pool) {
		out = append(out, field.NewPath("spec", "extentSize"))
	}
	return out
}

// changedFilesystems returns the names of old's backing file systems that
// pool removes, or whose source or mount path it changes.
func changedFilesystems(old, pool *cachev1alpha1.CachePool) []string {
	var out []string
	for _, o := range old.Spec.BackingFilesystems {
		n := policy.FindFilesystem(pool, o.Name)
		if n == nil {
			out = append(out, o.Name)
			continue
		}
		a, b := o.DeepCopy(), n.DeepCopy()
		a.AccessRules, b.AccessRules = nil, nil
		if !equality.Semantic.DeepEqual(a, b) {
			out = append(out, o.Name)
		}
	}
	return out
}

// extentSize is the pool's extent size in bytes; the schema defaults it.
func extentSize(pool *cachev1alpha1.CachePool) int64 {
	if pool.Spec.ExtentSize == nil {
		return 1 << 20
	}
	return pool.Spec.ExtentSize.Value()
}

// guardedInstances is how many instances a refusal names.
const guardedInstances = 5

// instances returns "namespace/name" of the pool's instances that match,
// at most guardedInstances of them and then "...".
func (g *PoolGuard) instances(ctx context.Context, pool string, match func(*cachev1alpha1.CacheInstance) bool) ([]string, error) {
	var list cachev1alpha1.CacheInstanceList
	if err := g.Reader.List(ctx, &list); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the CacheInstances of pool %s: %w", pool, err))
	}
	var out []string
	for i := range list.Items {
		inst := &list.Items[i]
		if inst.Spec.Pool != pool || !match(inst) {
			continue
		}
		if len(out) == guardedInstances {
			return append(out, "..."), nil
		}
		out = append(out, inst.Namespace+"/"+inst.Name)
	}
	return out, nil
}
