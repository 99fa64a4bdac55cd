package cacheinstance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// ServiceName returns the name of the headless Service of an instance's
// servers; each server is reachable as <pod>.<service>.
func ServiceName(inst *cachev1alpha1.CacheInstance) string {
	return inst.Name + "-servers"
}

func objectMeta(inst *cachev1alpha1.CacheInstance, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: inst.Namespace, Labels: serverLabels(inst)}
}

// ensureService creates the headless Service that gives each server a
// stable DNS name. It publishes not-ready addresses so that clients can
// find a server that is restarting.
func (r *Reconciler) ensureService(ctx context.Context, s *scope) (ctrl.Result, error) {
	svc := &corev1.Service{
		ObjectMeta: objectMeta(s.inst, ServiceName(s.inst)),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: serverLabels(s.inst), PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{
				{Name: "data", Port: DataPort, TargetPort: intstr.FromString("data")},
				{Name: "control", Port: ControlPort, TargetPort: intstr.FromString("control")},
			},
		},
	}
	return ctrl.Result{}, r.createIfMissing(ctx, s, svc)
}

// ensureDisruptionBudget refuses every voluntary eviction of a server, such
// as a node drain's: a server's dirty data lives on its node. It asks for
// every server to stay available (minAvailable) rather than for none to go
// (maxUnavailable: 0): the disruption controller counts the pods of a
// maxUnavailable only through a workload controller's scale, which server
// pods lack, and would warn about every instance (UnmanagedPods) and
// report no expected pods.
func (r *Reconciler) ensureDisruptionBudget(ctx context.Context, s *scope) (ctrl.Result, error) {
	all := intstr.FromInt32(int32(max(1, len(s.inst.Status.Servers))))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: objectMeta(s.inst, ServiceName(s.inst)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &all,
			Selector:     &metav1.LabelSelector{MatchLabels: serverLabels(s.inst)},
		},
	}
	return ctrl.Result{}, r.createIfMissing(ctx, s, pdb)
}

// createIfMissing creates a server object unless it exists. A failure
// (a Pod Security level or a quota of the namespace that refuses it, say)
// is kept in s, so that status says why the servers do not come up.
func (r *Reconciler) createIfMissing(ctx context.Context, s *scope, o client.Object) error {
	err := r.Client.Create(ctx, o)
	if err == nil {
		ctrl.LoggerFrom(ctx).Info("Created server object", "kind", fmt.Sprintf("%T", o), "name", o.GetName())
	}
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	s.createErr = fmt.Errorf("creating %s: %w", o.GetName(), err)
	return s.createErr
}

// ensurePods creates the pod of every placed server that has none, and
// replaces pods that ended, on the same node.
func (r *Reconciler) ensurePods(ctx context.Context, s *scope) (ctrl.Result, error) {
	for i := range s.inst.Status.Servers {
		pod := s.pods[i]
		if pod != nil && pod.DeletionTimestamp.IsZero() && !podEnded(pod) {
			if err := r.protect(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		if pod != nil {
			// An ended or deleted pod is released, so that it can be replaced.
			if err := r.releaseAndDelete(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		if ok, err := r.mayCreate(ctx, s); !ok || err != nil {
			return staleCopy(s), err
		}
		pod = buildServerPod(s, i, r.Options)
		if err := r.createIfMissing(ctx, s, pod); err != nil {
			return ctrl.Result{}, err
		}
		s.pods[i] = pod
	}
	r.checkPods(s)
	return ctrl.Result{}, nil
}

func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
