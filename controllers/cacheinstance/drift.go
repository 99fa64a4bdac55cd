package cacheinstance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// liveFlags are the server flags whose values reach running servers without
// a restart (pushTunables): a pod whose arguments differ only in these is
// not outdated.
var liveFlags = []string{
	"--writeback-threads", "--dirty-high", "--dirty-low", "--evict-high", "--evict-low",
	"--max-file-size", "--max-files", "--write-window-multiplier", "--write-window-length",
}

// checkPods records in s how each running server pod differs from the pod
// this manager makes now for its server: pods are never updated, so an
// upgrade of the manager, or a change of the pool that the arguments
// follow (the caller ranges of a shared instance, the prefix its backing
// directory must stay beneath), reaches a server only when its pod is
// deleted and made anew.
func (r *Reconciler) checkPods(s *scope) {
	if s.pool == nil || !s.inst.DeletionTimestamp.IsZero() {
		return
	}
	s.podsChecked = true
	s.outdated = nil
	for i := range s.inst.Status.Servers {
		pod := s.pods[i]
		if pod == nil || !pod.DeletionTimestamp.IsZero() || podEnded(pod) {
			continue
		}
		if d := podDrift(pod, buildServerPod(s, i, r.Options)); len(d) > 0 {
			s.outdated = append(s.outdated, fmt.Sprintf("%s (%s)", pod.Name, strings.Join(d, "; ")))
		}
	}
}

// podDrift says how pod differs from want in what makes a server: the
// images, pull policies and pull secrets, and the commands and arguments
// of its containers, leaving out the live flags. What admission or other
// controllers add to a pod (containers, secrets) does not count; a policy
// that rewrites images does, and keeps such pods outdated.
func podDrift(pod, want *corev1.Pod) []string {
	var d []string
	for _, w := range slices.Concat(want.Spec.InitContainers, want.Spec.Containers) {
		c := findContainer(pod, w.Name)
		if c == nil {
			d = append(d, "no container "+w.Name)
			continue
		}
		if c.Image != w.Image {
			d = append(d, fmt.Sprintf("%s image %s, now %s", w.Name, c.Image, w.Image))
		}
		if w.ImagePullPolicy != "" && c.ImagePullPolicy != w.ImagePullPolicy {
			d = append(d, fmt.Sprintf("%s pull policy %s, now %s", w.Name, c.ImagePullPolicy, w.ImagePullPolicy))
		}
		had, has := fixedArgs(slices.Concat(c.Command, c.Args)), fixedArgs(slices.Concat(w.Command, w.Args))
		if gone, added := missing(had, has), missing(has, had); len(gone)+len(added) > 0 {
			d = append(d, fmt.Sprintf("%s arguments %s, now %s", w.Name, strings.Join(gone, " "), strings.Join(added, " ")))
		}
	}
	// Admission may add the secrets of the namespace's service account:
	// only those the manager names count.
	if gone := missingRefs(want.Spec.ImagePullSecrets, pod.Spec.ImagePullSecrets); len(gone) > 0 {
		d = append(d, "no image pull secret "+strings.Join(gone, ", "))
	}
	return d
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

// fixedArgs are args without the live flags.
func fixedArgs(args []string) []string {
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		name, _, _ := strings.Cut(a, "=")
		return slices.Contains(liveFlags, name)
	})
}

// missingRefs are the names of the references of a that b lacks.
func missingRefs(a, b []corev1.LocalObjectReference) []string {
	var m []string
	for _, r := range a {
		if !slices.Contains(b, r) {
			m = append(m, r.Name)
		}
	}
	return m
}

// missing are the elements of a that b lacks, in a's order.
func missing(a, b []string) []string {
	var m []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			m = append(m, x)
		}
	}
	return m
}

// setOutdatedCondition says whether server pods differ from the pods the
// manager makes now, naming them. It is left as it was in a pass that did
// not look at the pods.
func setOutdatedCondition(s *scope, now time.Time) {
	if !s.podsChecked {
		return
	}
	if len(s.outdated) == 0 {
		setCondition(s, now, cachev1alpha1.ConditionServersOutdated, false, cachev1alpha1.ReasonAsExpected,
			"every server pod runs as the manager makes it now")
		return
	}
	setCondition(s, now, cachev1alpha1.ConditionServersOutdated, true, cachev1alpha1.ReasonPodsOutdated,
		fmt.Sprintf("server pods run otherwise than the manager makes them now: %s; pods are not updated in place: delete one at a time, after the one before is ready again, and each comes back on its node as the manager makes it now and recovers the data of its cache directory",
			strings.Join(s.outdated, ", ")))
}

// recordOutdatedTransition records an Event when server pods turn out to
// differ from the pods the manager makes now, or no longer do.
func (r *Reconciler) recordOutdatedTransition(s *scope) {
	action := func(string) string { return "CheckServerPods" }
	r.recordTransition(s, cachev1alpha1.ConditionServersOutdated, action, "Server pods outdated", "Server pods up to date")
}
