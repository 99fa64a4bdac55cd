package cacheinstance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/hint"
)

// preload copies spec.preload up once all servers are ready. The servers
// run it in the background, each copying up the extents it holds, through
// a hint runner of its own, whose attempts may take as long as preloads
// do. A pass only starts it, reports its progress from the servers' stats
// in status.preload, and takes its outcome; the pass goes on meanwhile
// (hints, gates), and asks to be polled again. The call is idempotent, so
// an attempt that is cut short, or lost with a restart of the manager, is
// simply started again.
func (r *Reconciler) preload(ctx context.Context, s *scope) (ctrl.Result, error) {
	key := string(s.inst.UID)
	if len(s.inst.Spec.Preload) == 0 {
		// Nothing to preload, or nothing any more: spec.preload may be
		// emptied while its preload runs, which is then over.
		r.preloads.Drop(key)
		s.inst.Status.Preload = nil
		return ctrl.Result{}, nil
	}
	if preloaded(s.inst) || !s.allServersReady() {
		return ctrl.Result{}, nil
	}
	state, out := r.preloads.Poll(key)
	if state == hint.Running && !slices.Equal(out.Requests, preloadRequests(s.inst)) {
		// spec.preload changed while the attempt runs: it would copy up
		// paths no longer asked for, up to its end, before the new ones
		// start. Cancelled, it ends with its servers' next extent, and
		// the next pass starts the preload of the paths asked for now.
		r.preloads.Cancel(key)
	}
	switch state {
	case hint.Absent:
		return ctrl.Result{}, r.startPreload(ctx, s, key)
	case hint.Done:
		if !slices.Equal(out.Requests, preloadRequests(s.inst)) {
			// spec.preload changed while the attempt ran, which may change
			// it until the preload is done: what it gained is not copied
			// up yet. Paths copied up already are found cached.
			return ctrl.Result{}, r.startPreload(ctx, s, key)
		}
		return ctrl.Result{}, r.endPreload(s, out)
	}
	st := s.inst.Status.Preload
	if st == nil {
		// The status of the pass that started it was not written.
		st = &cachev1alpha1.PreloadStatus{StartedAt: &metav1.Time{Time: r.Options.Now()}}
		s.inst.Status.Preload = st
	}
	st.BytesDone, st.BytesTotal = preloadProgress(s, out)
	s.requeueWithin(requestPollInterval)
	return ctrl.Result{}, nil
}

// startPreload starts the preload on every server. The first start of a
// preload is recorded in status.preload and with an Event; starting again
// after a failed attempt or a restart of the manager is not.
func (r *Reconciler) startPreload(ctx context.Context, s *scope, key string) error {
	targets, err := r.requestTargets(ctx, s)
	if err != nil {
		return r.retryPreload(s, err)
	}
	ctrl.LoggerFrom(ctx).Info("Preloading", "paths", len(s.inst.Spec.Preload), "servers", len(targets))
	r.preloads.StartAll(key, preloadRequests(s.inst), targets)
	s.requeueWithin(requestPollInterval)
	if s.inst.Status.Preload != nil {
		return nil
	}
	s.inst.Status.Preload = &cachev1alpha1.PreloadStatus{StartedAt: &metav1.Time{Time: r.Options.Now()}}
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonPreloadStarted, "Preload",
		"Copying up spec.preload (%s) on %d servers", countPaths(len(s.inst.Spec.Preload)), len(targets))
	return nil
}

// preloadRequests are the paths of spec.preload as preload hints, relative
// to the instance's root.
func preloadRequests(inst *cachev1alpha1.CacheInstance) []cachev1alpha1.RequestSpec {
	base := backingDir(inst)
	reqs := make([]cachev1alpha1.RequestSpec, 0, len(inst.Spec.Preload))
	for _, p := range inst.Spec.Preload {
		rel := strings.TrimPrefix(strings.TrimPrefix(string(p), base), "/")
		reqs = append(reqs, cachev1alpha1.RequestSpec{ID: "preload", Operation: cachev1alpha1.RequestPreload, Path: rel})
	}
	return reqs
}

// endPreload takes the outcome of an attempt. Success makes Preloaded True.
// A failure is returned, so the pass is retried with the controller's
// backoff: one that may pass (a server down or slow) is an Event and
// leaves the condition Preloading; one that cannot (a path missing or not
// readable by runAs) turns it PreloadFailed, and is retried too, since
// fixing the backing file system is enough to let it succeed.
func (r *Reconciler) endPreload(s *scope, out hint.Outcome) error {
	if out.Err == nil {
		msg := fmt.Sprintf("copied up %s, all of spec.preload (%s)", control.FormatBytes(out.Bytes), countPaths(len(s.inst.Spec.Preload)))
		s.inst.Status.Preload = nil
		setCondition(s, r.Options.Now(), cachev1alpha1.ConditionPreloaded, true, cachev1alpha1.ReasonAsExpected, msg)
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeNormal, cachev1alpha1.ReasonPreloadSucceeded, "Preload", "Preload done: %s", msg)
		return nil
	}
	if !hint.Final(cachev1alpha1.RequestPreload, out.Err) {
		return r.retryPreload(s, out.Err)
	}
	s.preloadErr = out.Err
	if !preloadFailed(s.original) {
		r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonPreloadFailed, "Preload",
			"Preload failed: %v", out.Err)
	}
	return fmt.Errorf("preloading: %w", out.Err)
}

// retryPreload records a failed attempt that may pass; the returned error
// makes the controller try again with backoff.
func (r *Reconciler) retryPreload(s *scope, err error) error {
	r.Recorder.Eventf(s.inst, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonPreloadRetrying, "Preload",
		"Preload attempt failed, retrying: %v", err)
	return fmt.Errorf("preloading: %w", err)
}

// preloadFailed reports whether the preload failed for a reason that
// retrying alone cannot fix.
func preloadFailed(inst *cachev1alpha1.CacheInstance) bool {
	c := meta.FindStatusCondition(inst.Status.Conditions, cachev1alpha1.ConditionPreloaded)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == cachev1alpha1.ReasonPreloadFailed
}

// preloadProgress is how far the running preloads of the instance's servers
// got, from the stats of this pass, plus what the preload calls that
// ended already hold. A user's preload hint running at the same time
// counts in too: the servers report the sum of their preloads.
func preloadProgress(s *scope, out hint.Outcome) (done, total int64) {
	done, total = out.Bytes, out.Bytes
	for _, st := range s.stats {
		done += st.PreloadBytesDone
		total += st.PreloadBytesTotal
	}
	return done, total
}

// preloadMessage describes the progress of a running preload for the
// Preloaded condition: "copied up 1.2 GiB of 3.4 GiB (35%)".
func preloadMessage(st *cachev1alpha1.PreloadStatus) string {
	if st == nil || st.BytesTotal == 0 {
		return "copying up spec.preload: finding the files"
	}
	return fmt.Sprintf("copied up %s of %s (%d%%)", control.FormatBytes(st.BytesDone), control.FormatBytes(st.BytesTotal), 100*st.BytesDone/st.BytesTotal)
}

// countPaths says "1 path" or "n paths".
func countPaths(n int) string {
	if n == 1 {
		return "1 path"
	}
	return fmt.Sprintf("%d paths", n)
}
