package podvolumes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Uses reports whether the pod uses the instance named name, by label or
// through a bound burstcache volume.
func (u Uses) Uses(pod *corev1.Pod, name string) bool {
	if pod.Labels[cachev1alpha1.LabelInstance] == name {
		return true
	}
	for _, n := range u.Instances {
		if n == name {
			return true
		}
	}
	return false
}

// Ready reports whether every instance the pod uses, by LabelInstance or
// through burstcache volumes, is Ready. A volume of an Immediate class that
// is not bound yet has no Ready instance. readyNow names an instance to
// take as Ready whatever its stored status says: the reconciler's pass
// that found it Ready has not written that yet.
func Ready(ctx context.Context, r client.Reader, pod *corev1.Pod, readyNow string) (bool, error) {
	uses, err := Find(ctx, r, pod)
	if err != nil || uses.Unbound {
		return false, err
	}
	names := uses.Instances
	if name := pod.Labels[cachev1alpha1.LabelInstance]; name != "" {
		names = append(names, name)
	}
	for _, name := range names {
		if name == readyNow {
			continue
		}
		ok, err := instanceReady(ctx, r, pod.Namespace, name)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func instanceReady(ctx context.Context, r client.Reader, ns, name string) (bool, error) {
	inst := &cachev1alpha1.CacheInstance{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, inst)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading CacheInstance %s: %w", name, err)
	}
	return inst.Status.Phase == cachev1alpha1.PhaseReady && inst.DeletionTimestamp.IsZero(), nil
}
