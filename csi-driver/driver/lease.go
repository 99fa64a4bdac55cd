package driver

import (
	"context"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/volume"
)

// putLease creates or updates the mount Lease of the instance on this node,
// listing pods. The Lease tells the operator that the node's mount exists
// and may hold data the servers have not seen; teardown waits for it.
func (n *nodeServer) putLease(ctx context.Context, namespace, instance string, pods []string) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: volume.MountLeaseName(instance, n.opts.NodeName),
	}}
	err := n.opts.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading mount lease: %w", err)
	}
	exists := err == nil
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[cachev1alpha1.LabelInstance] = instance
	lease.Labels[cachev1alpha1.LabelComponent] = cachev1alpha1.ComponentMount
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[cachev1alpha1.AnnotationMountPods] = strings.Join(pods, ",")
	lease.Spec.HolderIdentity = ptr.To(n.opts.NodeName)
	if lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: metav1.Now().Time}
	}
	if exists {
		err = n.opts.Client.Update(ctx, lease)
	} else {
		err = n.opts.Client.Create(ctx, lease)
	}
	if err != nil {
		return fmt.Errorf("writing mount lease: %w", err)
	}
	return nil
}

// deleteLease deletes the mount Lease of the instance on this node. Only an
// unstage whose daemon exited after publishing may call it.
func (n *nodeServer) deleteLease(ctx context.Context, namespace, instance string) error {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: volume.MountLeaseName(instance, n.opts.NodeName),
	}}
	if err := n.opts.Client.Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting mount lease: %w", err)
	}
	return nil
}
