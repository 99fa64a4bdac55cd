package driver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// reportingController names the node plugin in the events it records.
const reportingController = "csi.burstcache.io/node"

// warn records a Warning event on the CacheInstance ns/name, where its
// users look (kubectl describe). It is best effort: a failure is logged.
func (n *nodeServer) warn(ctx context.Context, ns, name, reason, action, note string) {
	ci := &cachev1alpha1.CacheInstance{}
	if err := n.opts.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ci); err != nil {
		logf(ctx).Error(err, "Recording an event failed: reading the instance", "instance", ns+"/"+name, "reason", reason)
		return
	}
	now := metav1.NowMicro()
	ev := &eventsv1.Event{
		// Named as client-go's recorders name events.
		ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%x", name, now.UnixNano())},
		EventTime:           now,
		ReportingController: reportingController,
		ReportingInstance:   fmt.Sprintf("%s-%s", reportingController, n.opts.NodeName),
		Action:              action,
		Reason:              reason,
		Note:                note,
		Type:                corev1.EventTypeWarning,
		Regarding: corev1.ObjectReference{
			APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "CacheInstance",
			Namespace: ns, Name: name, UID: ci.UID, ResourceVersion: ci.ResourceVersion,
		},
	}
	if err := n.opts.Client.Create(ctx, ev); err != nil {
		logf(ctx).Error(err, "Recording an event failed", "instance", ns+"/"+name, "reason", reason)
	}
}
