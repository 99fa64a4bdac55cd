package cacheinstance

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// setReadyCondition sums up the other conditions: Ready is True only when
// the instance was accepted, its servers are ready and the preload is done.
func setReadyCondition(s *scope, now time.Time) {
	ok, reason, msg := readiness(s)
	setCondition(s, now, cachev1alpha1.ConditionReady, ok, reason, msg)
}

func readiness(s *scope) (bool, string, string) {
	conds := s.inst.Status.Conditions
	switch {
	case !s.inst.DeletionTimestamp.IsZero():
		return false, cachev1alpha1.ReasonFlushing, "the instance is being deleted"
	case s.rejected != nil:
		return false, s.rejected.Reason(), s.rejected.Error()
	case s.noCapacity != nil:
		return false, cachev1alpha1.ReasonInsufficientCapacity, s.noCapacity[0].Message
	case len(s.inst.Status.Servers) == 0:
		return false, cachev1alpha1.ReasonProvisioning, "placing servers"
	case !s.allServersReady():
		return false, cachev1alpha1.ReasonServersNotReady, s.notReadyMessage()
	case !meta.IsStatusConditionTrue(conds, cachev1alpha1.ConditionPreloaded):
		c := meta.FindStatusCondition(conds, cachev1alpha1.ConditionPreloaded)
		if c != nil {
			return false, c.Reason, c.Message
		}
		return false, cachev1alpha1.ReasonPreloading, "preload not started"
	}
	return true, cachev1alpha1.ReasonAsExpected, "the instance can be mounted"
}

// computePhase derives the phase from the conditions and status.
func computePhase(s *scope) cachev1alpha1.Phase {
	conds := s.inst.Status.Conditions
	switch {
	case !s.inst.DeletionTimestamp.IsZero() && flushDone(s.inst):
		return cachev1alpha1.PhaseDeleting
	case !s.inst.DeletionTimestamp.IsZero():
		return cachev1alpha1.PhaseFlushing
	case s.rejected != nil:
		return cachev1alpha1.PhaseFailed
	case s.noCapacity != nil || len(s.inst.Status.Servers) == 0:
		return cachev1alpha1.PhasePending
	case !s.allServersReady():
		return cachev1alpha1.PhaseProvisioning
	case !meta.IsStatusConditionTrue(conds, cachev1alpha1.ConditionPreloaded):
		return cachev1alpha1.PhasePreloading
	}
	return cachev1alpha1.PhaseReady
}

// recordTransitions records an Event when the phase changed, with the
// reason of the condition that explains the new phase.
func (r *Reconciler) recordTransitions(s *scope) {
	from, to := s.original.Status.Phase, s.inst.Status.Phase
	if from == to {
		return
	}
	typ := cachev1alpha1.ConditionReady
	if to == cachev1alpha1.PhaseFlushing || to == cachev1alpha1.PhaseDeleting {
		typ = cachev1alpha1.ConditionFlushed
	}
	reason, msg := string(to), ""
	c := meta.FindStatusCondition(s.inst.Status.Conditions, typ)
	if c != nil && (to != cachev1alpha1.PhaseDeleting || c.Status == metav1.ConditionTrue) {
		reason, msg = c.Reason, c.Message
	}
	eventType := corev1.EventTypeNormal
	if to == cachev1alpha1.PhaseFailed {
		eventType = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(s.inst, nil, eventType, reason, string(to), "Phase %s -> %s: %s", phaseName(from), to, msg)
}

func phaseName(p cachev1alpha1.Phase) string {
	if p == "" {
		return "(new)"
	}
	return string(p)
}

// recordCreateFailure records a Warning Event when this pass could not
// create a server object, unless the ServersReady condition said so
// already: an Event per failure, not per pass.
func (r *Reconciler) recordCreateFailure(s *scope) {
	if s.createErr == nil {
		return
	}
	was := meta.FindStatusCondition(s.original.Status.Conditions, cachev1alpha1.ConditionServersReady)
	now := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionServersReady)
	if was != nil && now != nil && was.Message == now.Message {
		return
	}
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonServersNotReady, "Provision",
		"Cannot create the servers: %v", s.createErr)
}
