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
// write window is used up. It is left as it was in a pass in which no
// server answered.
func setReadOnlyCondition(s *scope, now time.Time) {
	if len(s.stats) == 0 {
		return
	}
	var full []string
	for i, st := range s.stats {
		if st.ReadOnly && i < len(s.inst.Status.Servers) {
			full = append(full, s.inst.Status.Servers[i].Name)
		}
	}
	if len(full) == 0 {
		setCondition(s, now, cachev1alpha1.ConditionReadOnly, false, cachev1alpha1.ReasonAsExpected,
			"writes are within the write window")
		return
	}
	slices.Sort(full)
	setCondition(s, now, cachev1alpha1.ConditionReadOnly, true, cachev1alpha1.ReasonWriteWindowExceeded,
		fmt.Sprintf("the write window (spec.limits.writeWindow) is used up on %s: opens for writing, creates and writes fail with EROFS until old writes leave the window",
			strings.Join(full, ", ")))
}

// recordReadOnlyTransition records an Event when the instance turns
// read-only, or writable again.
func (r *Reconciler) recordReadOnlyTransition(s *scope) {
	was := meta.IsStatusConditionTrue(s.original.Status.Conditions, cachev1alpha1.ConditionReadOnly)
	c := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionReadOnly)
	if c == nil || was == (c.Status == metav1.ConditionTrue) {
		return
	}
	if was {
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, c.Reason, "WriteWindow", "Writable again: %s", c.Message)
		return
	}
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, c.Reason, "WriteWindow", "Read-only: %s", c.Message)
}
