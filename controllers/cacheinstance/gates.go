package cacheinstance

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/podvolumes"
)

// releaseGates removes the scheduling gate from the pods that use the
// instance once it is Ready (all servers serve and the preload is done), so
// that their scheduler may place them. A pod uses it by LabelInstance or
// through a burstcache volume; a pod that uses other instances too waits
// until they are all Ready.
func (r *Reconciler) releaseGates(ctx context.Context, s *scope) (ctrl.Result, error) {
	if computePhase(s) != cachev1alpha1.PhaseReady {
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(s.inst.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the pods that wait for the instance: %w", err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !slices.ContainsFunc(pod.Spec.SchedulingGates, isCacheGate) {
			continue
		}
		if err := r.releaseIfReady(ctx, s, pod); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// releaseIfReady ungates a gated pod that uses the instance once every
// instance it uses is Ready.
func (r *Reconciler) releaseIfReady(ctx context.Context, s *scope, pod *corev1.Pod) error {
	uses, err := podvolumes.Find(ctx, r.Client, pod)
	if err != nil {
		return fmt.Errorf("finding the volumes of pod %s: %w", pod.Name, err)
	}
	if !uses.Uses(pod, s.inst.Name) {
		return nil
	}
	ready, err := podvolumes.Ready(ctx, r.Client, pod, s.inst.Name)
	if err != nil || !ready {
		return err
	}
	return r.ungate(ctx, pod)
}

func isCacheGate(g corev1.PodSchedulingGate) bool { return g.Name == cachev1alpha1.SchedulingGate }

func (r *Reconciler) ungate(ctx context.Context, pod *corev1.Pod) error {
	gates := slices.DeleteFunc(slices.Clone(pod.Spec.SchedulingGates), isCacheGate)
	if len(gates) == len(pod.Spec.SchedulingGates) {
		return nil
	}
	// The optimistic lock keeps the other gates another controller may be
	// removing at the same time.
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pod.Spec.SchedulingGates = gates
	ctrl.LoggerFrom(ctx).Info("Releasing a pod for scheduling", "pod", pod.Name)
	if err := r.Client.Patch(ctx, pod, patch); err != nil {
		return fmt.Errorf("removing the scheduling gate of pod %s: %w", pod.Name, err)
	}
	return nil
}

// unavailable reports whether an instance in phase p will not become Ready
// again.
func unavailable(p cachev1alpha1.Phase) bool {
	return p == cachev1alpha1.PhaseFailed || p == cachev1alpha1.PhaseFlushing || p == cachev1alpha1.PhaseDeleting
}

// warnGatedPods records a Warning Event on every pod held at the scheduling
// gate for the instance while it is in a phase it will not come back from
// Ready (to): it is being deleted, or its pool refuses it. The pods stay
// gated, since they cannot run without the cache, and without the Event
// nothing on them would say why they wait. Each pod is told once, also
// one created after the turn (its creation starts a pass); failures only
// cost the Events, and are logged.
func (r *Reconciler) warnGatedPods(ctx context.Context, s *scope, to cachev1alpha1.Phase) {
	if !unavailable(to) {
		r.warned.forget(s.inst.UID)
		return
	}
	if s.gone {
		defer r.warned.forget(s.inst.UID)
	}
	why := "is being deleted"
	if to == cachev1alpha1.PhaseFailed {
		_, reason, msg := readiness(s)
		why = fmt.Sprintf("cannot become Ready (%s: %s)", reason, msg)
	}
	log := ctrl.LoggerFrom(ctx)
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(s.inst.Namespace)); err != nil {
		log.Error(err, "Listing the pods that wait for the instance")
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !slices.ContainsFunc(pod.Spec.SchedulingGates, isCacheGate) || r.warned.has(s.inst.UID, pod.UID) {
			continue
		}
		uses, err := podvolumes.Find(ctx, r.Client, pod)
		if err != nil {
			log.Error(err, "Finding the volumes of a gated pod", "pod", pod.Name)
			continue
		}
		if !uses.Uses(pod, s.inst.Name) {
			continue
		}
		r.Recorder.Eventf(pod, s.inst, corev1.EventTypeWarning, cachev1alpha1.ReasonInstanceUnavailable, "Schedule",
			"Held at the scheduling gate for CacheInstance %s, which %s: the pod stays gated until an instance of that name is Ready; delete the pod to give up",
			s.inst.Name, why)
		r.warned.add(s.inst.UID, pod.UID)
	}
}

// warnedPods remembers, by instance, the pods warnGatedPods told. An
// instance's entry goes when it is gone or Ready again, so the set holds
// only the gated pods of instances that will not become Ready; a restart
// of the manager forgets it, and those pods are told once more.
type warnedPods struct {
	mu   sync.Mutex
	pods map[types.UID]map[types.UID]struct{}
}

func (w *warnedPods) has(inst, pod types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pods[inst][pod]
	return ok
}

func (w *warnedPods) add(inst, pod types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pods == nil {
		w.pods = map[types.UID]map[types.UID]struct{}{}
	}
	if w.pods[inst] == nil {
		w.pods[inst] = map[types.UID]struct{}{}
	}
	w.pods[inst][pod] = struct{}{}
}

func (w *warnedPods) forget(inst types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pods, inst)
}
