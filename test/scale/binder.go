package main

import (
	"context"
	"log"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// startBinder binds every pending pod to the node its node selector names by
// host name: the one decision a scheduler makes for burstcache's pinned
// server pods.
func (cl *cluster) startBinder(ctx context.Context, _ config) error {
	cs, err := kubernetes.NewForConfig(cl.cfg)
	if err != nil {
		return err
	}
	ctx, cl.stopBinder = context.WithCancel(ctx)
	go func() {
		for ctx.Err() == nil {
			if err := bindPending(ctx, cs); err != nil && ctx.Err() == nil {
				log.Printf("Binder watch ended, restarting: %v", err)
			}
		}
	}()
	return nil
}

// bindPending binds the pods that are pending now, then those that come,
// until the watch ends.
func bindPending(ctx context.Context, cs kubernetes.Interface) error {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "").String()}
	list, err := cs.CoreV1().Pods("").List(ctx, opts)
	if err != nil {
		return err
	}
	for i := range list.Items {
		bind(ctx, cs, &list.Items[i])
	}
	opts.ResourceVersion = list.ResourceVersion
	w, err := cs.CoreV1().Pods("").Watch(ctx, opts)
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
			bind(ctx, cs, pod)
		}
	}
	return nil
}

func bind(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) {
	node := pod.Spec.NodeSelector[corev1.LabelHostname]
	if node == "" || pod.Spec.NodeName != "" || !pod.DeletionTimestamp.IsZero() {
		return
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := cs.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		log.Printf("Binding pod %s/%s failed: %v", pod.Namespace, pod.Name, err)
	}
}
