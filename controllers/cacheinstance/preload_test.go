package cacheinstance

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/hint"
)

func TestPreloadedConditionShowsProgress(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	failed := metav1.Condition{Type: cachev1alpha1.ConditionPreloaded, Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonPreloadFailed, Message: "no such file"}
	for name, tc := range map[string]struct {
		status     *cachev1alpha1.PreloadStatus
		before     []metav1.Condition
		wantReason string
		wantMsg    string
	}{
		"not started":             {wantReason: cachev1alpha1.ReasonPreloading, wantMsg: "copying up spec.preload: finding the files"},
		"walking the tree":        {status: &cachev1alpha1.PreloadStatus{}, wantReason: cachev1alpha1.ReasonPreloading, wantMsg: "copying up spec.preload: finding the files"},
		"part done":               {status: &cachev1alpha1.PreloadStatus{BytesDone: 1288490188, BytesTotal: 3650722201}, wantReason: cachev1alpha1.ReasonPreloading, wantMsg: "copied up 1.2 GiB of 3.4 GiB (35%)"},
		"small and done":          {status: &cachev1alpha1.PreloadStatus{BytesDone: 512, BytesTotal: 512}, wantReason: cachev1alpha1.ReasonPreloading, wantMsg: "copied up 512 B of 512 B (100%)"},
		"a failure stays in view": {status: &cachev1alpha1.PreloadStatus{BytesDone: 1, BytesTotal: 2}, before: []metav1.Condition{failed}, wantReason: cachev1alpha1.ReasonPreloadFailed, wantMsg: "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			inst := instanceWith(2, 2)
			inst.Spec.Preload = []cachev1alpha1.AbsolutePath{"/lus/a"}
			inst.Status.Preload = tc.status
			inst.Status.Conditions = tc.before
			s := newScope(inst)
			setConditions(s, now)
			c := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionPreloaded)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.wantReason || c.Message != tc.wantMsg {
				t.Fatalf("Preloaded = %+v, want False, %s, %q", c, tc.wantReason, tc.wantMsg)
			}
			if s.inst.Status.Phase != cachev1alpha1.PhasePreloading {
				t.Errorf("phase %s, want Preloading", s.inst.Status.Phase)
			}
		})
	}
}

// TestPreloadProgressCountsFinishedServers checks that a server whose
// preload ended, and whose stats therefore show none, still counts with
// what its call answered.
func TestPreloadProgressCountsFinishedServers(t *testing.T) {
	s := newScope(instanceWith(3, 3))
	s.stats[0] = control.Stats{PreloadBytesDone: 10, PreloadBytesTotal: 40}
	s.stats[1] = control.Stats{PreloadBytesDone: 25, PreloadBytesTotal: 30}
	s.stats[2] = control.Stats{}
	done, total := preloadProgress(s, hint.Outcome{Bytes: 35})
	if done != 70 || total != 105 {
		t.Errorf("preloadProgress = %d of %d, want 70 of 105", done, total)
	}
}
