package kubelet

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2" //nolint:staticcheck // a Ginkgo helper, written as the suites that use it
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Run starts every server pod of every namespace as it appears, and stops
// the process of a pod that is deleted, until ctx is done. It looks every
// interval. A pod that fails to start fails the running spec.
func (k *Kubelet) Run(ctx context.Context, interval time.Duration) {
	defer GinkgoRecover()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		k.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sync starts the server pods no process runs and stops the processes of
// pods that are gone or being deleted.
func (k *Kubelet) sync(ctx context.Context) {
	var pods corev1.PodList
	err := k.Client.List(ctx, &pods, client.MatchingLabels{cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer})
	if err != nil {
		return
	}
	live := map[string]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		live[PodKey(pod)] = true
		if !k.Running(PodKey(pod)) && ctx.Err() == nil {
			k.Start(ctx, pod)
		}
	}
	for _, key := range k.keys() {
		if !live[key] {
			k.Stop(key)
		}
	}
}
