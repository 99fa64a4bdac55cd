package policy

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Validate checks an instance against its pool and returns every rule it
// breaks. pool is nil when spec.pool names no CachePool; nsLabels are the
// labels of the instance's namespace, which access rules may select on.
// Capacity is checked against the pool's ceiling and total capacity here;
// whether it fits the free capacity now is Fits's question. The total
// capacity is checked only until the servers are placed: it follows the
// nodes the pool can place servers on now, which a cordoned or lost node
// shrinks, while placed servers keep the capacity they hold.
func Validate(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string) Violations {
	if pool == nil {
		return Violations{{Reason: cachev1alpha1.ReasonPoolNotFound, Field: "spec.pool",
			Message: fmt.Sprintf("CachePool %q does not exist", inst.Spec.Pool)}}
	}
	vs := CheckPool(pool)
	vs = append(vs, checkAccess(inst, pool, nsLabels)...)
	vs = append(vs, checkCeilings(inst, pool)...)
	if !Allocated(inst) {
		vs = append(vs, checkTotalCapacity(inst, pool)...)
	}
	return append(vs, checkType(inst)...)
}

// checkType refuses scratch instances. Their servers have no file system in
// common: each would keep its own namespace in a volume of its pod, so a
// file made through one server would be missing from directories listed
// through another, and spec.stageOut is not carried out at teardown, which
// would drop the data it promises to keep.
func checkType(inst *cachev1alpha1.CacheInstance) Violations {
	if inst.Spec.Type != cachev1alpha1.CacheTypeScratch {
		return nil
	}
	return Violations{{Reason: cachev1alpha1.ReasonNotSupported, Field: "spec.type",
		Message: "type scratch is not supported yet; cache a directory of the parallel file system instead " +
			"(type cache, with spec.backing the directory to keep the data in, and spec.teardown.policy Discard for data not worth keeping)"}}
}

// checkAccess checks the backing path (or the stage-out destination of a
// scratch instance) and runAs against the access rules.
func checkAccess(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string) Violations {
	target, field := inst.Spec.Backing, "spec.backing"
	if target == nil && inst.Spec.StageOut != nil {
		target, field = &inst.Spec.StageOut.Destination, "spec.stageOut.destination"
	}
	if target == nil {
		return checkScratchIdentity(inst, pool, nsLabels)
	}
	fs := findFilesystem(pool, target.Filesystem)
	if fs == nil {
		return Violations{{Reason: cachev1alpha1.ReasonFilesystemNotFound, Field: field + ".filesystem",
			Message: fmt.Sprintf("CachePool %q has no backing file system %q", pool.Name, target.Filesystem)}}
	}
	if fs.PVC != nil && fs.PVC.Namespace != inst.Namespace {
		// Pods mount claims of their own namespace only: a server of this
		// instance would mount a claim of that name in the instance's own
		// namespace, one its users may have made, whichever way a rule
		// (a namespace selector) granted the path.
		return Violations{{Reason: cachev1alpha1.ReasonMediaUnavailable, Field: field + ".filesystem",
			Message: fmt.Sprintf("backing file system %q is claim %s/%s, which servers in namespace %s cannot mount", fs.Name, fs.PVC.Namespace, fs.PVC.ClaimName, inst.Namespace)}}
	}
	return checkPath(inst, fs, string(target.Path), field+".path", nsLabels)
}

// checkPath checks that one access rule of fs grants p to the namespace and
// allows runAs.
func checkPath(inst *cachev1alpha1.CacheInstance, fs *cachev1alpha1.BackingFilesystem, p, field string, nsLabels map[string]string) Violations {
	switch {
	case !isClean(p):
		return Violations{{Reason: cachev1alpha1.ReasonPathNotAllowed, Field: field,
			Message: fmt.Sprintf("path %q is not absolute and clean (it cleans to a different path)", p)}}
	case !under(p, string(fs.MountPath)):
		return Violations{{Reason: cachev1alpha1.ReasonPathNotAllowed, Field: field,
			Message: fmt.Sprintf("path %q is not under the file system's mountPath %s", p, fs.MountPath)}}
	}
	granted := grantingRules(fs, inst.Namespace, p, nsLabels)
	if len(granted) == 0 {
		return Violations{{Reason: cachev1alpha1.ReasonPathNotAllowed, Field: field,
			Message: fmt.Sprintf("no access rule of backing file system %q grants %s to namespace %s", fs.Name, p, inst.Namespace)}}
	}
	for _, r := range granted {
		if identityAllowed(r, inst.Spec.RunAs) {
			return nil
		}
	}
	return Violations{{Reason: cachev1alpha1.ReasonIdentityNotAllowed, Field: "spec.runAs",
		Message: fmt.Sprintf("runAs %s is not mapped to namespace %s for %s by the pool's access rules", identity(inst.Spec.RunAs), inst.Namespace, p)}}
}

// checkScratchIdentity checks a scratch instance with no stage-out: some
// rule of the pool must map its namespace to runAs.
func checkScratchIdentity(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string) Violations {
	for i := range pool.Spec.BackingFilesystems {
		for _, r := range pool.Spec.BackingFilesystems[i].AccessRules {
			if namespaceMatches(r, inst.Namespace, nsLabels) && identityAllowed(r, inst.Spec.RunAs) {
				return nil
			}
		}
	}
	return Violations{{Reason: cachev1alpha1.ReasonIdentityNotAllowed, Field: "spec.runAs",
		Message: fmt.Sprintf("runAs %s is not mapped to namespace %s by any access rule of the pool", identity(inst.Spec.RunAs), inst.Namespace)}}
}

func findFilesystem(pool *cachev1alpha1.CachePool, name string) *cachev1alpha1.BackingFilesystem {
	for i := range pool.Spec.BackingFilesystems {
		if pool.Spec.BackingFilesystems[i].Name == name {
			return &pool.Spec.BackingFilesystems[i]
		}
	}
	return nil
}

// FindFilesystem returns the backing file system of pool named name, or nil.
func FindFilesystem(pool *cachev1alpha1.CachePool, name string) *cachev1alpha1.BackingFilesystem {
	return findFilesystem(pool, name)
}

// grantingRules returns the rules of fs that match the namespace and have a
// prefix holding p.
func grantingRules(fs *cachev1alpha1.BackingFilesystem, ns, p string, nsLabels map[string]string) []cachev1alpha1.AccessRule {
	var out []cachev1alpha1.AccessRule
	for _, r := range fs.AccessRules {
		if !namespaceMatches(r, ns, nsLabels) {
			continue
		}
		for _, prefix := range r.PathPrefixes {
			if under(p, string(prefix)) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// namespaceMatches reports whether the rule lists ns or selects its labels.
// A selector that does not parse selects nothing.
func namespaceMatches(r cachev1alpha1.AccessRule, ns string, nsLabels map[string]string) bool {
	for _, n := range r.Namespaces {
		if n == ns {
			return true
		}
	}
	if r.NamespaceSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(r.NamespaceSelector)
	return err == nil && sel.Matches(labels.Set(nsLabels))
}
