package cacheinstance

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// observeMounts records in status what mounts the instance: the pods that
// carry LabelInstance with its name, other than its servers, that have not
// ended and are not held back by the scheduling gate (such a pod was never
// scheduled, so it never mounted the instance, and it waits for the
// instance to be Ready: counting it would hold a teardown for ever); and
// the mount Leases of CSI node plugins, with the pods each
// publishes the instance to, or the node alone when it has the instance
// staged for no pod.
func (r *Reconciler) observeMounts(ctx context.Context, s *scope) (ctrl.Result, error) {
	sel := client.MatchingLabels{cachev1alpha1.LabelInstance: s.inst.Name}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(s.inst.Namespace), sel); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the pods that mount the instance: %w", err)
	}
	var leases coordinationv1.LeaseList
	sel[cachev1alpha1.LabelComponent] = cachev1alpha1.ComponentMount
	if err := r.Client.List(ctx, &leases, client.InNamespace(s.inst.Namespace), sel); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the mount leases of the instance: %w", err)
	}
	s.inst.Status.ActiveMounts = mergeMounts(podMounts(pods.Items), leaseMounts(leases.Items))
	s.mountLeases = map[string]string{}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil {
			s.mountLeases[*l.Spec.HolderIdentity] = l.Name
		}
	}
	return ctrl.Result{}, nil
}

// findUnreadyMount sets s.unreadyMount to the first active mount whose
// node is not Ready or is gone: a node that is lost never unmounts, and its
// mount holds a teardown until an admin says the node is dead.
func (r *Reconciler) findUnreadyMount(ctx context.Context, s *scope) error {
	for i, m := range s.inst.Status.ActiveMounts {
		if m.Node == "" {
			continue
		}
		node := &corev1.Node{}
		err := r.Client.Get(ctx, client.ObjectKey{Name: m.Node}, node)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("reading node %s: %w", m.Node, err)
		}
		if err != nil || !nodeReady(node) {
			s.unreadyMount = &s.inst.Status.ActiveMounts[i]
			return nil
		}
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podMounts(pods []corev1.Pod) []cachev1alpha1.Mount {
	var out []cachev1alpha1.Mount
	for i := range pods {
		p := &pods[i]
		if p.Labels[cachev1alpha1.LabelComponent] == cachev1alpha1.ComponentServer || podEnded(p) ||
			slices.ContainsFunc(p.Spec.SchedulingGates, isCacheGate) {
			continue
		}
		out = append(out, cachev1alpha1.Mount{Node: p.Spec.NodeName, Pod: p.Name})
	}
	return out
}

// leaseMounts reads the mounts that node plugins report. A Lease that is
// being deleted still counts: its node may not have unmounted yet.
func leaseMounts(leases []coordinationv1.Lease) []cachev1alpha1.Mount {
	var out []cachev1alpha1.Mount
	for i := range leases {
		l := &leases[i]
		node := ""
		if l.Spec.HolderIdentity != nil {
			node = *l.Spec.HolderIdentity
		}
		n := len(out)
		for _, entry := range strings.Split(l.Annotations[cachev1alpha1.AnnotationMountPods], ",") {
			pod, volume, _ := strings.Cut(strings.TrimSpace(entry), "/")
			if pod != "" {
				out = append(out, cachev1alpha1.Mount{Node: node, Pod: pod, Volume: volume})
			}
		}
		if len(out) == n {
			out = append(out, cachev1alpha1.Mount{Node: node})
		}
	}
	return out
}

// mergeMounts joins the mounts seen on pods and on Leases: a pod that both
// report is listed once, with the Lease's volume. The result is sorted, so
// that status does not change from pass to pass for nothing.
func mergeMounts(fromPods, fromLeases []cachev1alpha1.Mount) []cachev1alpha1.Mount {
	seen := map[string]bool{}
	out := append([]cachev1alpha1.Mount(nil), fromLeases...)
	for _, m := range fromLeases {
		if m.Pod != "" {
			seen[m.Pod] = true
		}
	}
	for _, m := range fromPods {
		if !seen[m.Pod] {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Node != out[j].Node {
			return out[i].Node < out[j].Node
		}
		return out[i].Pod < out[j].Pod
	})
	return out
}

// leaseToInstance maps a mount Lease to its instance.
func leaseToInstance(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[cachev1alpha1.LabelComponent] != cachev1alpha1.ComponentMount {
		return nil
	}
	name := o.GetLabels()[cachev1alpha1.LabelInstance]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
