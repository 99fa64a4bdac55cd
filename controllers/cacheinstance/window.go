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
	action := func(reason string) string {
		if reason == cachev1alpha1.ReasonCacheDeviceFailed {
			return "CacheDevice"
		}
		return "WriteWindow"
	}
	r.recordTransition(s, cachev1alpha1.ConditionReadOnly, action, "Read-only", "Writable again")
}

// recordTransition records the Event that a change of condition typ in
// this pass calls for (see transition): a Warning that says on, or a
// Normal one that says off, each with the condition's message. action
// names what the Event is about, from the reason the condition was True
// with.
func (r *Reconciler) recordTransition(s *scope, typ string, action func(reason string) string, on, off string) {
	old := meta.FindStatusCondition(s.original.Status.Conditions, typ)
	c := meta.FindStatusCondition(s.inst.Status.Conditions, typ)
	switch transition(old, c) {
	case corev1.EventTypeWarning:
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, c.Reason, action(c.Reason), "%s: %s", on, c.Message)
	case corev1.EventTypeNormal:
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, c.Reason, action(old.Reason), "%s: %s", off, c.Message)
	}
}

// transition says which Event a change of a condition that is True when
// something is wrong calls for, from old to c: a Warning when it turns
// True, or stays True for another reason; a Normal one when it turns
// False; none otherwise ("").
func transition(old, c *metav1.Condition) string {
	if c == nil {
		return ""
	}
	was, is := old != nil && old.Status == metav1.ConditionTrue, c.Status == metav1.ConditionTrue
	switch {
	case is && (!was || old.Reason != c.Reason):
		return corev1.EventTypeWarning
	case was && !is:
		return corev1.EventTypeNormal
	}
	return ""
}
