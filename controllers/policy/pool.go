package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// CheckPool returns what makes a pool unusable beyond what its schema
// checks: a capacity per node that cannot be counted in bytes, a
// granularity that does not fit the per-node capacity, an extent size that
// the servers would not start with, and backing file systems that servers
// cannot mount.
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
	vs = append(vs, checkExtentSize(pool)...)
	for _, fs := range pool.Spec.BackingFilesystems {
		if fs.PVC != nil && len(fs.AccessRules) > 0 {
			vs = append(vs, checkPVCNamespaces(fs)...)
		}
	}
	return vs
}

// The extent sizes cache servers start with (cacheserver/engine
// MinExtentSize and MaxExtentSize, which the operator may not import).
var (
	minExtentSize = resource.MustParse("4Ki")
	maxExtentSize = resource.MustParse("1Gi")
)

// checkExtentSize refuses an extent size that the pool's servers would not
// start with: outside 4Ki to 1Gi, or more than half of the allocation
// granularity, since a server's capacity is a multiple of the granularity
// and must hold at least 2 extents. The schema refuses these too; this
// check is for pools stored before it did.
func checkExtentSize(pool *cachev1alpha1.CachePool) Violations {
	es := extentSize(pool)
	switch {
	case es.Cmp(minExtentSize) < 0 || es.Cmp(maxExtentSize) > 0:
		return Violations{{Reason: cachev1alpha1.ReasonMediaUnavailable, Field: "spec.extentSize",
			Message: fmt.Sprintf("%s is not from 4Ki to 1Gi, the extent sizes cache servers start with", es.String())}}
	case 2*es.Value() > countBytes(pool.Spec.AllocationGranularity):
		return Violations{{Reason: cachev1alpha1.ReasonMediaUnavailable, Field: "spec.extentSize",
			Message: fmt.Sprintf("%s is more than half of spec.allocationGranularity %s: a cache server's capacity is a multiple of the granularity and must hold at least 2 extents",
				es.String(), pool.Spec.AllocationGranularity.String())}}
	}
	return nil
}

// extentSize is the pool's extent size; the schema defaults it to 1Mi.
func extentSize(pool *cachev1alpha1.CachePool) resource.Quantity {
	if pool.Spec.ExtentSize == nil {
		return resource.MustParse("1Mi")
	}
	return *pool.Spec.ExtentSize
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
