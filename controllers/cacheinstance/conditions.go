package cacheinstance

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// setConditions computes every condition and the phase from what the pass
// observed.
func setConditions(s *scope, now time.Time) {
	if !s.inst.DeletionTimestamp.IsZero() {
		setFlushedCondition(s, now)
	} else {
		setAcceptedCondition(s, now)
		setServersReadyCondition(s, now)
		setPreloadedCondition(s, now)
		setReadOnlyCondition(s, now)
		setWriteBackCondition(s, now)
		setIndexCommitCondition(s, now)
		setOutdatedCondition(s, now)
	}
	setReadyCondition(s, now)
	s.inst.Status.Phase = computePhase(s)
	s.inst.Status.ReadyServers = int32(s.readyServers())
	setNeverReady(s)
}

// setNeverReady marks a new instance, one no pass has given a phase yet,
// until it first turns Ready; also one deleted before any pass gave it a
// phase, since only a pass that wrote the phase Ready can have let a job
// use it. An instance that already had a phase when the field was
// introduced is never marked: it may have been Ready.
func setNeverReady(s *scope) {
	switch {
	case s.inst.Status.Phase == cachev1alpha1.PhaseReady:
		s.inst.Status.NeverReady = false
	case s.original.Status.Phase == "":
		s.inst.Status.NeverReady = true
	}
}

func setCondition(s *scope, now time.Time, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.inst.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: clip(msg, maxConditionMessage),
		ObservedGeneration: s.inst.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

func setAcceptedCondition(s *scope, now time.Time) {
	if s.rejected != nil {
		msg := s.rejected.Error()
		if len(s.inst.Status.Servers) > 0 {
			msg += "; the servers run on for the pods that use the instance already, and deleting it stops them after writing its data back"
		}
		setCondition(s, now, cachev1alpha1.ConditionAccepted, false, s.rejected.Reason(), msg)
		return
	}
	if s.pool == nil {
		return
	}
	setCondition(s, now, cachev1alpha1.ConditionAccepted, true, cachev1alpha1.ReasonAsExpected,
		fmt.Sprintf("CachePool %s grants the backing path and identity to the namespace", s.pool.Name))
}

func setServersReadyCondition(s *scope, now time.Time) {
	n, ready := len(s.inst.Status.Servers), s.readyServers()
	switch {
	case n == 0:
		return
	case ready == n:
		setCondition(s, now, cachev1alpha1.ConditionServersReady, true, cachev1alpha1.ReasonAsExpected,
			fmt.Sprintf("%d of %d servers ready", ready, n))
	default:
		setCondition(s, now, cachev1alpha1.ConditionServersReady, false, cachev1alpha1.ReasonServersNotReady, s.notReadyMessage())
	}
}

func setPreloadedCondition(s *scope, now time.Time) {
	switch {
	case s.preloadErr != nil:
		setCondition(s, now, cachev1alpha1.ConditionPreloaded, false, cachev1alpha1.ReasonPreloadFailed, s.preloadErr.Error())
	case preloaded(s.inst):
		return
	case len(s.inst.Spec.Preload) == 0 && s.allServersReady():
		setCondition(s, now, cachev1alpha1.ConditionPreloaded, true, cachev1alpha1.ReasonAsExpected, "nothing to preload")
	case preloadFailed(s.inst):
		// A new attempt runs; the failure stays in view until one succeeds.
		return
	case s.allServersReady():
		setCondition(s, now, cachev1alpha1.ConditionPreloaded, false, cachev1alpha1.ReasonPreloading, preloadMessage(s.inst.Status.Preload))
	}
}

// preloaded reports whether the preload finished for good.
func preloaded(inst *cachev1alpha1.CacheInstance) bool {
	return meta.IsStatusConditionTrue(inst.Status.Conditions, cachev1alpha1.ConditionPreloaded)
}

func setFlushedCondition(s *scope, now time.Time) {
	st := s.inst.Status
	switch {
	case len(st.ActiveMounts) > 0:
		msg := fmt.Sprintf("%d pods or nodes still mount the instance, such as %s", len(st.ActiveMounts), describeMount(st.ActiveMounts[0]))
		if m := s.unreadyMount; m != nil {
			msg = fmt.Sprintf("%d pods or nodes still mount the instance, such as %s, whose node is not Ready: %s",
				len(st.ActiveMounts), describeMount(*m), lostNodeAdvice(s, m.Node))
		}
		setCondition(s, now, cachev1alpha1.ConditionFlushed, false, cachev1alpha1.ReasonWaitingForUnmount, msg)
	case s.flushErr != nil:
		setCondition(s, now, cachev1alpha1.ConditionFlushed, false, cachev1alpha1.ReasonFlushFailed, s.flushErr.Error())
	case s.createErr != nil:
		setCondition(s, now, cachev1alpha1.ConditionFlushed, false, cachev1alpha1.ReasonFlushFailed,
			"bringing back a server to write its data back: "+s.createErr.Error())
	case !flushDone(s.inst):
		setCondition(s, now, cachev1alpha1.ConditionFlushed, false, cachev1alpha1.ReasonFlushing, "writing dirty data back")
	}
}

// flushDone reports whether the teardown write-back is over: everything was
// written back, or the user's Discard or timeout dropped the rest.
func flushDone(inst *cachev1alpha1.CacheInstance) bool {
	c := meta.FindStatusCondition(inst.Status.Conditions, cachev1alpha1.ConditionFlushed)
	if c == nil {
		return false
	}
	return c.Status == metav1.ConditionTrue || c.Reason == cachev1alpha1.ReasonDiscarded || c.Reason == cachev1alpha1.ReasonFlushTimedOut
}

// lostNodeAdvice says how to let a teardown go on past a node that will
// not unmount because it is lost.
func lostNodeAdvice(s *scope, node string) string {
	if lease, ok := s.mountLeases[node]; ok {
		return fmt.Sprintf("if the node is lost, delete its mount Lease (kubectl delete lease -n %s %s) and its pods once it is known dead; "+
			"what its mount had not sent to the servers is lost with it", s.inst.Namespace, lease)
	}
	return "if the node is lost, delete its pods once it is known dead (kubectl delete pod --force); what its mount had not sent to the servers is lost with it"
}

func describeMount(m cachev1alpha1.Mount) string {
	if m.Pod == "" {
		return "node " + m.Node
	}
	return "pod " + m.Pod + " on node " + m.Node
}

// serversWhere names, sorted, the servers whose statistics of this pass
// say something (what, ok): "name (what)", or the name alone when what is
// empty.
func serversWhere(s *scope, says func(control.Stats) (what string, ok bool)) []string {
	var out []string
	for i, st := range s.stats {
		if i >= len(s.inst.Status.Servers) {
			continue
		}
		what, ok := says(st)
		if !ok {
			continue
		}
		name := s.inst.Status.Servers[i].Name
		if what != "" {
			name = fmt.Sprintf("%s (%s)", name, what)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
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
