package cacheinstance

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// client returns a control API client of server i.
func (r *Reconciler) client(ctx context.Context, s *scope, i int) (*control.Client, error) {
	pod := s.pods[i]
	if pod == nil {
		return nil, fmt.Errorf("server %d has no pod", i)
	}
	addr, err := r.Options.Resolver(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("finding server %d: %w", i, err)
	}
	secret, err := r.controlSecret(ctx, s.inst)
	if err != nil {
		return nil, err
	}
	proto, err := serverProtocol(pod)
	if err != nil {
		return nil, fmt.Errorf("server %d: %w", i, err)
	}
	// The index names the server in the signature of calls of
	// control.ProtocolAddressed: the one of the pod the manager made for
	// it, which its server was started with (serverArgs).
	return control.NewClientFor(control.Server{Addr: addr, Index: i, Protocol: proto}, secret, nil), nil
}

// serverProtocol returns the control protocol that the server of pod
// speaks, as the pod, which the manager trusts, says it: never as an
// answer at the pod's address says, since anyone there can send one (see
// control.Protocol). A pod that does not say was made by a manager of the
// release before the annotation, whose servers sign calls but not
// answers.
func serverProtocol(pod *corev1.Pod) (control.Protocol, error) {
	v, ok := pod.Annotations[cachev1alpha1.AnnotationControlProtocol]
	if !ok {
		return control.ProtocolSignedCalls, nil
	}
	p, err := control.ParseProtocol(v)
	if err != nil {
		return 0, fmt.Errorf("annotation %s of pod %s: %w", cachev1alpha1.AnnotationControlProtocol, pod.Name, err)
	}
	return p, nil
}
