package cacheinstance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// setReadOnlyCondition says whether a server refuses writes because its
// cache device failed or its write window is used up. It is left as it was
// in a pass in which no server answered.
func setReadOnlyCondition(s *scope, now time.Time) {
	if len(s.stats) == 0 {
		return
	}
	var full, failed []string
	for i, st := range s.stats {
		if i >= len(s.inst.Status.Servers) {
			continue
		}
		name := s.inst.Status.Servers[i].Name
		if st.CacheDeviceError != "" {
			failed = append(failed, fmt.Sprintf("%s (%s)", name, st.CacheDeviceError))
		}
		if st.ReadOnly {
			full = append(full, name)
		}
	}
	slices.Sort(full)
	slices.Sort(failed)
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
	old := meta.FindStatusCondition(s.original.Status.Conditions, cachev1alpha1.ConditionReadOnly)
	c := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionReadOnly)
	was := old != nil && old.Status == metav1.ConditionTrue
	if c == nil {
		return
	}
	if is := c.Status == metav1.ConditionTrue; was == is && (!is || old.Reason == c.Reason) {
		return
	}
	action := "WriteWindow"
	if c.Reason == cachev1alpha1.ReasonCacheDeviceFailed {
		action = "CacheDevice"
	}
	if was {
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, c.Reason, action, "Writable again: %s", c.Message)
		return
	}
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, c.Reason, action, "Read-only: %s", c.Message)
}
