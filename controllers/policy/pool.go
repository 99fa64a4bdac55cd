package policy

import (
	"fmt"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// CheckPool returns what makes a pool unusable beyond what its schema
// checks: a capacity per node that cannot be counted in bytes, granularity
// and extent sizes that do not fit the per-node capacity, and backing file
// systems that servers cannot mount.
func CheckPool(pool *cachev1alpha1.CachePool) Violations {
	var vs Violations
	m := pool.Spec.Media
	if !countable(m.CapacityPerNode) {
		vs = append(vs, Violation{Reason: cachev1alpha1.ReasonMediaUnavailable, Field: "spec.media.capacityPerNode",
			Message: uncountable(m.CapacityPerNode)})
	}
	if pool.Spec.AllocationGranularity.Cmp(m.CapacityPerNode) > 0 {
		vs = append(vs, Violation{Reason: cachev1alpha1.ReasonMediaUnavailable, Field: "spec.allocationGranularity",
			Message: fmt.Sprintf("%s is larger than spec.media.capacityPerNode %s: no node could hold one unit",
				pool.Spec.AllocationGranularity.String(), m.CapacityPerNode.String())})
	}
	for _, fs := range pool.Spec.BackingFilesystems {
		if fs.PVC != nil && len(fs.AccessRules) > 0 {
			vs = append(vs, checkPVCNamespaces(fs)...)
		}
	}
	return vs
}

// checkPVCNamespaces: pods mount claims of their own namespace only, so a
// claim can serve only instances of its namespace.
func checkPVCNamespaces(fs cachev1alpha1.BackingFilesystem) Violations {
	for _, r := range fs.AccessRules {
		for _, ns := range r.Namespaces {
			if ns != fs.PVC.Namespace {
				return Violations{{Reason: cachev1alpha1.ReasonMediaUnavailable, Field: "spec.backingFilesystems[" + fs.Name + "].pvc",
					Message: fmt.Sprintf("claim %s/%s cannot be mounted by servers in namespace %s that an access rule grants", fs.PVC.Namespace, fs.PVC.ClaimName, ns)}}
			}
		}
	}
	return nil
}
