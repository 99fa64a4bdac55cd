package cacheinstance

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// releaseGates removes the scheduling gate from the pods that use the
// instance once it is Ready (all servers serve and the preload is done), so
// that their scheduler may place them.
func (r *Reconciler) releaseGates(ctx context.Context, s *scope) (ctrl.Result, error) {
	if computePhase(s) != cachev1alpha1.PhaseReady {
		return ctrl.Result{}, nil
	}
	var pods corev1.PodList
	err := r.Client.List(ctx, &pods, client.InNamespace(s.inst.Namespace),
		client.MatchingLabels{cachev1alpha1.LabelInstance: s.inst.Name})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the pods that wait for the instance: %w", err)
	}
	for i := range pods.Items {
		if err := r.ungate(ctx, &pods.Items[i]); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) ungate(ctx context.Context, pod *corev1.Pod) error {
	gates := slices.DeleteFunc(slices.Clone(pod.Spec.SchedulingGates), func(g corev1.PodSchedulingGate) bool {
		return g.Name == cachev1alpha1.SchedulingGate
	})
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
