package cacheinstance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/metrics"
)

// flush writes every server's dirty data back with a blocking Drain. A
// failure is an Event and a returned error, so the pass is retried with the
// controller's backoff; the instance stays Flushing with the reason in its
// Flushed condition. Only spec.teardown (Discard, or a timeout that
// expired) lets the teardown go past unwritten data, and that is recorded.
func (r *Reconciler) flush(ctx context.Context, s *scope) (ctrl.Result, error) {
	if flushDone(s.inst) {
		return ctrl.Result{}, nil
	}
	now := r.Options.Now()
	if s.inst.Status.Flush == nil {
		s.inst.Status.Flush = &cachev1alpha1.FlushStatus{StartedAt: &metav1.Time{Time: now}}
	}
	if reason, why := dropReason(s.inst, now); reason != "" {
		if err := r.dropUnwritten(ctx, s, reason, why); err != nil {
			return ctrl.Result{}, err
		}
		r.discardServers(ctx, s)
		return ctrl.Result{}, nil
	}
	if s.inst.Status.NeverReady && !s.allServersReady() {
		// Nothing can be dirty, and waiting for servers that never started
		// would hold the teardown forever.
		msg := "the instance was never Ready, so no job wrote to it: nothing to write back"
		setCondition(s, now, cachev1alpha1.ConditionFlushed, true, cachev1alpha1.ReasonNeverReady, msg)
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonNeverReady, "Flush", "%s", msg)
		return ctrl.Result{}, nil
	}
	remaining, err := r.flushServers(ctx, s)
	s.inst.Status.Flush.BytesRemaining = remaining
	if err != nil {
		s.flushErr = err
		return ctrl.Result{}, err
	}
	setCondition(s, now, cachev1alpha1.ConditionFlushed, true, cachev1alpha1.ReasonAsExpected, "every dirty byte was written back")
	metrics.ObserveFlush(s.inst.Namespace, metrics.KindTeardown, s.inst.Status.Flush.StartedAt.Time, r.Options.Now())
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonFlushing, "Flush", "Every dirty byte was written back")
	r.removeHidden(ctx, s)
	return ctrl.Result{}, nil
}

// removeHidden has every server remove the hidden names that files
// unlinked while open kept because their mount ended before the files'
// last close (a mount killed, a node lost). It runs once, right after the
// write-back: nothing mounts the instance any more, so no such file is
// open, and no server holds data that a write-back would bring back under
// a removed name. A name that stays loses nothing and only holds the
// teardown for nothing: it is a Warning event, not a retry. Files hidden
// for renames that failed get their names back instead, which a Warning
// event lists, so that their owners look at them.
func (r *Reconciler) removeHidden(ctx context.Context, s *scope) {
	var back []string
	errs := r.eachReadyServer(ctx, s, func(c *control.Client, ctx context.Context) error {
		res, err := c.RemoveHidden(ctx)
		for _, b := range res.GivenBack {
			if b.As == b.Path {
				back = append(back, fmt.Sprintf("%q", string(b.Path)))
			} else {
				back = append(back, fmt.Sprintf("%q (kept as %q: another file has its name)", string(b.Path), string(b.As)))
			}
		}
		return err
	})
	if len(back) > 0 {
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonFilesGivenBack, "Flush", "%s", clip(fmt.Sprintf(
			"Renames over %d files failed while a cache server was down, and their mounts ended before they could give the files their names back; the teardown did (paths in the cached directory): %s",
			len(back), strings.Join(back, ", ")), maxEventNote))
	}
	if len(errs) > 0 {
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonHiddenNamesLeft, "Flush",
			"Files unlinked while open by a mount that ended first keep hidden names in the backing file system: %v", errors.Join(errs...))
	}
}

// dropReason says whether the user's teardown settings allow dropping the
// unwritten data now, and why.
func dropReason(inst *cachev1alpha1.CacheInstance, now time.Time) (string, string) {
	t := inst.Spec.Teardown
	if t == nil {
		return "", ""
	}
	if t.Policy == cachev1alpha1.TeardownDiscard {
		return cachev1alpha1.ReasonDiscarded, "spec.teardown.policy is Discard"
	}
	if t.Timeout != nil && now.Sub(inst.Status.Flush.StartedAt.Time) >= t.Timeout.Duration {
		return cachev1alpha1.ReasonFlushTimedOut, fmt.Sprintf("spec.teardown.timeout %s passed", t.Timeout.Duration)
	}
	return "", ""
}

// flushServers flushes every server and returns the dirty bytes left.
func (r *Reconciler) flushServers(ctx context.Context, s *scope) (int64, error) {
	var remaining int64
	var errs []error
	for i, srv := range s.inst.Status.Servers {
		if s.pods[i] == nil {
			// The pod is protected by a finalizer; without one it was never
			// created, so it never held data.
			continue
		}
		left, err := r.flushServer(ctx, s, i)
		remaining += left
		if err != nil {
			err = fmt.Errorf("%s: %w", srv.Name, err)
			r.Recorder.Eventf(s.inst, s.pods[i], corev1.EventTypeWarning, cachev1alpha1.ReasonFlushFailed, "Flush",
				"Write-back of %s failed, retrying: %v", srv.Name, err)
			errs = append(errs, err)
		}
	}
	return remaining, errors.Join(errs...)
}

func (r *Reconciler) flushServer(ctx context.Context, s *scope, i int) (int64, error) {
	if !s.inst.Status.Servers[i].Ready {
		return 0, fmt.Errorf("server is not ready, so its dirty data cannot be written back until it runs again")
	}
	c, err := r.client(ctx, s, i)
	if err != nil {
		return 0, err
	}
	ctrl.LoggerFrom(ctx).Info("Flushing server", "server", s.inst.Status.Servers[i].Name)
	fctx, cancel := context.WithTimeout(ctx, r.Options.FlushAttemptTimeout)
	defer cancel()
	// Drain, not just Flush: no write may come after the teardown's
	// write-back, and a drained server that stops with nothing dirty
	// removes its cache files, which would keep their space on the node.
	res, err := c.Drain(fctx)
	if err != nil {
		return res.RemainingBytes, fmt.Errorf("flush: %w", err)
	}
	return res.RemainingBytes, nil
}

// discardServers tells every running server that the teardown goes past
// its unwritten data, so that it removes its cache files when its pod
// stops instead of keeping them, and their preallocated space, on the node
// for a restart that will never come. It is best effort: a server that
// cannot be reached keeps its files, which the admin guide says.
func (r *Reconciler) discardServers(ctx context.Context, s *scope) {
	for _, err := range r.eachReadyServer(ctx, s, (*control.Client).Discard) {
		ctrl.LoggerFrom(ctx).Info("A server keeps its cache files: telling it to discard them failed", "err", err)
	}
}

// eachReadyServer calls fn with a control client of every server that runs
// and is ready, one after the other, each call bounded by the flush attempt
// timeout. It returns the errors of the servers it could not reach or whose
// call failed, each naming its server.
func (r *Reconciler) eachReadyServer(ctx context.Context, s *scope, fn func(*control.Client, context.Context) error) []error {
	var errs []error
	for i, srv := range s.inst.Status.Servers {
		if s.pods[i] == nil || !srv.Ready {
			continue
		}
		c, err := r.client(ctx, s, i)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, r.Options.FlushAttemptTimeout)
			err = fn(c, cctx)
			cancel()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", srv.Name, err))
		}
	}
	return errs
}

// dropUnwritten goes past the data not written back, as the user asked,
// and records it: an annotation that stays on the object, a Warning Event
// and the Flushed condition.
func (r *Reconciler) dropUnwritten(ctx context.Context, s *scope, reason, why string) error {
	dirty := "unknown"
	if s.inst.Status.Usage != nil && s.inst.Status.Usage.Dirty != nil {
		dirty = s.inst.Status.Usage.Dirty.String()
	}
	msg := fmt.Sprintf("%s: data not written back (last seen dirty: %s) was dropped", why, dirty)
	// The patch answers with the stored object; keep this pass's status.
	status := s.inst.Status.DeepCopy()
	patch := client.MergeFrom(s.inst.DeepCopy())
	if s.inst.Annotations == nil {
		s.inst.Annotations = map[string]string{}
	}
	s.inst.Annotations[cachev1alpha1.AnnotationTeardownRecord] = r.Options.Now().UTC().Format(time.RFC3339) + " " + reason + ": " + msg
	err := r.Client.Patch(ctx, s.inst, patch)
	s.inst.Status = *status
	if err != nil {
		return fmt.Errorf("recording the teardown: %w", err)
	}
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, reason, "Teardown", "%s", msg)
	setCondition(s, r.Options.Now(), cachev1alpha1.ConditionFlushed, false, reason, msg)
	return nil
}
