package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// checkCeilings checks every knob that the pool caps. The capacity is
// checked only until the servers are placed: it cannot change, and the
// placed servers hold it whatever the ceiling says later.
func checkCeilings(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool) Violations {
	c := pool.Spec.Ceilings
	if c == nil {
		return nil
	}
	s := inst.Spec
	var vs Violations
	if !Allocated(inst) {
		vs = appendQuantityCeiling(vs, "spec.capacity", &s.Capacity, c.Capacity)
	}
	if s.WriteBack != nil {
		vs = appendIntCeiling(vs, "spec.writeBack.threads", s.WriteBack.Threads, c.WriteBackThreads)
		vs = appendIntCeiling(vs, "spec.writeBack.dirtyHighWatermark", s.WriteBack.DirtyHighWatermark, c.DirtyHighWatermark)
	}
	if s.Limits != nil {
		vs = appendQuantityCeiling(vs, "spec.limits.maxFileSize", s.Limits.MaxFileSize, c.MaxFileSize)
		vs = appendInt64Ceiling(vs, "spec.limits.maxFiles", s.Limits.MaxFiles, c.MaxFiles)
		if s.Limits.WriteWindow != nil {
			vs = appendIntCeiling(vs, "spec.limits.writeWindow.multiplier", s.Limits.WriteWindow.Multiplier, c.WriteWindowMultiplier)
		}
	}
	return vs
}

func appendQuantityCeiling(vs Violations, field string, v, ceiling *resource.Quantity) Violations {
	if v == nil || ceiling == nil || v.Cmp(*ceiling) <= 0 {
		return vs
	}
	return append(vs, ceilingViolation(field, v.String(), ceiling.String()))
}

func appendIntCeiling(vs Violations, field string, v, ceiling *int32) Violations {
	if v == nil || ceiling == nil || *v <= *ceiling {
		return vs
	}
	return append(vs, ceilingViolation(field, fmt.Sprint(*v), fmt.Sprint(*ceiling)))
}

func appendInt64Ceiling(vs Violations, field string, v, ceiling *int64) Violations {
	if v == nil || ceiling == nil || *v <= *ceiling {
		return vs
	}
	return append(vs, ceilingViolation(field, fmt.Sprint(*v), fmt.Sprint(*ceiling)))
}

func ceilingViolation(field, v, ceiling string) Violation {
	return Violation{Reason: cachev1alpha1.ReasonExceedsCeiling, Field: field,
		Message: fmt.Sprintf("%s is above the pool's ceiling %s", v, ceiling)}
}
