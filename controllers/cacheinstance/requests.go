package cacheinstance

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/hint"
	"github.com/burstcache/burstcache/controllers/metrics"
)

// requestPollInterval is how often the progress of a running user hint or
// preload is written to status.
const requestPollInterval = time.Second

// serveRequest runs the user hint of the request annotation on every
// server, in the background, and reports it in status.lastRequest. A
// request is run once per id. An attempt that fails for a reason that may
// pass is retried with the controller's backoff; nothing in a hint drops
// dirty data, so retrying is always safe.
func (r *Reconciler) serveRequest(ctx context.Context, s *scope) (ctrl.Result, error) {
	value, ok := s.inst.Annotations[cachev1alpha1.AnnotationRequest]
	if !ok {
		return ctrl.Result{}, nil
	}
	req, err := hint.Parse(value)
	st := r.requestStatus(s, req)
	if isFinal(st.Phase) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		r.endRequest(s, cachev1alpha1.RequestFailed, err)
		return ctrl.Result{}, nil
	}
	if !s.allServersReady() {
		if st.Attempts == 0 {
			st.Phase, st.Message = cachev1alpha1.RequestPending, "waiting for every server to be ready"
		}
		return ctrl.Result{RequeueAfter: requestPollInterval}, nil
	}
	if st.Phase == cachev1alpha1.RequestPending {
		st.Message = ""
	}
	return r.advanceRequest(ctx, s, req)
}

// requestStatus returns status.lastRequest for req, starting it afresh
// when the annotation holds a new id.
func (r *Reconciler) requestStatus(s *scope, req cachev1alpha1.RequestSpec) *cachev1alpha1.RequestStatus {
	st := s.inst.Status.LastRequest
	id := clip(req.ID, maxRequestID)
	if st == nil || st.ID != id {
		st = &cachev1alpha1.RequestStatus{
			ID: id, Operation: req.Operation, Path: clip(req.Path, maxRequestPath),
			Phase: cachev1alpha1.RequestPending, StartedAt: &metav1.Time{Time: r.Options.Now()},
		}
		s.inst.Status.LastRequest = st
	}
	return st
}

// advanceRequest starts the request on the servers, reports its progress,
// or takes its outcome.
func (r *Reconciler) advanceRequest(ctx context.Context, s *scope, req cachev1alpha1.RequestSpec) (ctrl.Result, error) {
	st := s.inst.Status.LastRequest
	key := string(s.inst.UID) + "/" + req.ID
	state, out := r.requests.Poll(key)
	switch state {
	case hint.Absent:
		targets, err := r.requestTargets(ctx, s)
		if err != nil {
			return ctrl.Result{}, r.retryRequest(s, err)
		}
		ctrl.LoggerFrom(ctx).Info("Running user request", "id", req.ID, "operation", req.Operation, "path", req.Path)
		r.requests.Start(key, req, targets)
		r.setRequestPhase(s, runningPhase(st), st.Message)
	case hint.Running:
		r.setRequestPhase(s, runningPhase(st), st.Message)
	case hint.Done:
		st.BytesRemaining = out.Remaining
		if out.Err == nil {
			if req.Operation == cachev1alpha1.RequestPreload {
				st.BytesDone, st.BytesTotal = out.Bytes, out.Bytes
			}
			r.endRequest(s, cachev1alpha1.RequestSucceeded, nil)
			if req.Operation == cachev1alpha1.RequestFlush {
				metrics.ObserveFlush(s.inst.Namespace, metrics.KindRequest, st.StartedAt.Time, st.CompletedAt.Time)
			}
			return ctrl.Result{}, nil
		}
		if hint.Final(req.Operation, out.Err) {
			r.endRequest(s, cachev1alpha1.RequestFailed, out.Err)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.retryRequest(s, out.Err)
	}
	if req.Operation == cachev1alpha1.RequestFlush && req.Path == "" {
		st.BytesRemaining = dirtyBytes(s)
	}
	if req.Operation == cachev1alpha1.RequestPreload {
		st.BytesDone, st.BytesTotal = preloadProgress(s, out)
	}
	return ctrl.Result{RequeueAfter: requestPollInterval}, nil
}

// requestTargets returns a control client of every server.
func (r *Reconciler) requestTargets(ctx context.Context, s *scope) ([]hint.Target, error) {
	targets := make([]hint.Target, 0, len(s.inst.Status.Servers))
	for i, srv := range s.inst.Status.Servers {
		c, err := r.client(ctx, s, i)
		if err != nil {
			return nil, err
		}
		targets = append(targets, hint.Target{Name: srv.Name, Client: c})
	}
	return targets, nil
}

// retryRequest records a failed attempt; the returned error makes the
// controller try again with backoff.
func (r *Reconciler) retryRequest(s *scope, err error) error {
	st := s.inst.Status.LastRequest
	st.Attempts++
	r.setRequestPhase(s, cachev1alpha1.RequestRetrying, err.Error())
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonRequestRetrying, "Request",
		"Request %s (%s %q) failed, retrying: %v", st.ID, st.Operation, st.Path, err)
	return fmt.Errorf("user request %s: %w", st.ID, err)
}

// endRequest puts the request in a final phase.
func (r *Reconciler) endRequest(s *scope, phase cachev1alpha1.RequestPhase, err error) {
	st := s.inst.Status.LastRequest
	st.CompletedAt = &metav1.Time{Time: r.Options.Now()}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.setRequestPhase(s, phase, msg)
}

// setRequestPhase sets the request's phase and records an Event when it
// changes.
func (r *Reconciler) setRequestPhase(s *scope, phase cachev1alpha1.RequestPhase, msg string) {
	st := s.inst.Status.LastRequest
	changed := st.Phase != phase
	st.Phase, st.Message = phase, clip(msg, maxRequestMessage)
	if !changed {
		return
	}
	switch phase {
	case cachev1alpha1.RequestRunning:
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonRequestRunning, "Request",
			"Running request %s: %s %q", st.ID, st.Operation, st.Path)
	case cachev1alpha1.RequestSucceeded:
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonRequestSucceeded, "Request",
			"Request %s (%s %q) succeeded on every server", st.ID, st.Operation, st.Path)
	case cachev1alpha1.RequestFailed:
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonRequestFailed, "Request",
			"Request %s (%s %q) failed: %s", st.ID, st.Operation, st.Path, msg)
	}
}

// runningPhase is the phase of a request that runs: Retrying once an
// attempt failed, with the failure kept in the message, so that it is seen
// for as long as the request goes on.
func runningPhase(st *cachev1alpha1.RequestStatus) cachev1alpha1.RequestPhase {
	if st.Attempts > 0 {
		return cachev1alpha1.RequestRetrying
	}
	return cachev1alpha1.RequestRunning
}

func isFinal(p cachev1alpha1.RequestPhase) bool {
	return p == cachev1alpha1.RequestSucceeded || p == cachev1alpha1.RequestFailed
}

// dirtyBytes sums the dirty data the servers reported in this pass.
func dirtyBytes(s *scope) int64 {
	var n int64
	for _, st := range s.stats {
		n += st.DirtyBytes
	}
	return n
}
