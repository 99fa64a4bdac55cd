package webhooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/podvolumes"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims;persistentvolumes,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create,versions=v1,name=mpod-v1.cache.burstcache.io,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded

// PodGate holds pods that use a CacheInstance that is not Ready yet back
// from scheduling with a scheduling gate, so that whatever scheduler runs
// the job (the default one, Volcano, Kueue) starts it only once its data
// path exists. The CacheInstance reconciler removes the gate when the
// instance turns Ready. A pod uses an instance when it carries
// LabelInstance with the instance's name, or mounts a PVC or generic
// ephemeral volume of a burstcache StorageClass with Immediate binding.
// WaitForFirstConsumer volumes are not gated: their claim waits for the
// pod's node, so the pod must be scheduled first; NodeStageVolume waits
// for the instance instead.
//
// The chart installs it twice: failing closed for pods that carry
// directives, which would otherwise run without the cache they ask for,
// and failing open for every other pod of the cluster, whose creation a
// manager that is down must not stop; such a pod runs ungated and its
// mount waits for the instance.
type PodGate struct {
	// Reader reads CacheInstances and CachePools.
	Reader client.Reader
	// Writer creates the instances of jobdw directives.
	Writer client.Client
	// APIReader reads a jobdw instance that exists already from the API
	// server, since the cache may not show one a sibling pod created a
	// moment ago.
	APIReader client.Reader
}

var _ admission.Defaulter[*corev1.Pod] = (*PodGate)(nil)

// SetupWithManager registers the webhook with mgr's webhook server.
func (g *PodGate) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).WithDefaulter(g).Complete()
}

// Default translates the pod's DataWarp directives, refusing a pod whose
// directives cannot be honoured with the line and the reason, and adds the scheduling gate to a pod
// whose instance is not Ready.
func (g *PodGate) Default(ctx context.Context, pod *corev1.Pod) error {
	text, key, err := directiveText(pod)
	if err == nil && key != "" {
		err = g.applyDirectives(ctx, pod, text)
	}
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("annotation %s: %v", key, err))
	}
	// burstcache's own pods (servers, and the CSI node plugin's mount pods,
	// which carry the instance label but live in another namespace and set
	// spec.nodeName) are the data path itself and are never gated.
	if _, ours := pod.Labels[cachev1alpha1.LabelComponent]; ours || hasGate(pod) {
		return nil
	}
	ready, err := podvolumes.Ready(ctx, g.Reader, pod, "")
	if err != nil || ready {
		return err
	}
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: cachev1alpha1.SchedulingGate})
	return nil
}

func hasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == cachev1alpha1.SchedulingGate {
			return true
		}
	}
	return false
}
