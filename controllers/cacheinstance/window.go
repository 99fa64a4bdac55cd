package cacheinstance

import (
	"fmt"
	"strings"
	"time"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// setReadOnlyCondition says whether a server refuses writes because its
// cache device failed or its write window is used up. It is left as it was
// in a pass in which no server answered.
func setReadOnlyCondition(s *scope, now time.Time) {
	if len(s.stats) == 0 {
		return
	}
	failed := serversWhere(s, func(st control.Stats) (string, bool) { return st.CacheDeviceError, st.CacheDeviceError != "" })
	full := serversWhere(s, func(st control.Stats) (string, bool) { return "", st.ReadOnly })
	switch {
	case len(failed) > 0:
		setCondition(s, now, cachev1alpha1.ConditionReadOnly, true, cachev1alpha1.ReasonCacheDeviceFailed,
			fmt.Sprintf("the cache device failed on %s: opens for writing, writes and fsync fail with EIO there, while reads go on and dirty data is written back; delete the instance to write everything back, and replace the device",
				strings.Join(failed, ", ")))
	case len(full) > 0:
		setCondition(s, now, cachev1alpha1.ConditionReadOnly, true, cachev1alpha1.ReasonWriteWindowExceeded,
			fmt.Sprintf("the write window (spec.limits.writeWindow) is used up on %s: opens for writing, creates and writes fail with EROFS until old writes leave the window",
				strings.Join(full, ", ")))
	default:
		setCondition(s, now, cachev1alpha1.ConditionReadOnly, false, cachev1alpha1.ReasonAsExpected,
			"writes are within the write window")
	}
}

// recordReadOnlyTransition records an Event when the instance turns
// read-only, or read-only for another reason, or writable again.
func (r *Reconciler) recordReadOnlyTransition(s *scope) {
	action := func(reason string) string {
		if reason == cachev1alpha1.ReasonCacheDeviceFailed {
			return "CacheDevice"
		}
		return "WriteWindow"
	}
	r.recordTransition(s, cachev1alpha1.ConditionReadOnly, action, "Read-only", "Writable again")
}
