package cacheinstance

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/policy"
)

// instanceWith builds an instance with n servers of which ready are ready.
func instanceWith(n, ready int) *cachev1alpha1.CacheInstance {
	inst := &cachev1alpha1.CacheInstance{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "ns", Generation: 3}}
	for i := 0; i < n; i++ {
		inst.Status.Servers = append(inst.Status.Servers, cachev1alpha1.ServerStatus{Name: serverName(i), Ready: i < ready})
	}
	return inst
}

func TestSetConditions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	deleted := metav1.NewTime(now)
	for name, tc := range map[string]struct {
		scope       func() *scope
		wantPhase   cachev1alpha1.Phase
		wantReady   string // reason of the Ready condition
		wantFlushed string // reason of Flushed, "" for none
	}{
		"refused by the pool": {
			scope: func() *scope {
				s := newScope(instanceWith(0, 0))
				s.rejected = &policy.Error{Violations: policy.Violations{{Reason: cachev1alpha1.ReasonPathNotAllowed, Field: "spec.backing.path", Message: "no"}}}
				return s
			},
			wantPhase: cachev1alpha1.PhaseFailed, wantReady: cachev1alpha1.ReasonPathNotAllowed,
		},
		"waiting for capacity": {
			scope: func() *scope {
				s := newScope(instanceWith(0, 0))
				s.noCapacity = policy.Violations{{Reason: cachev1alpha1.ReasonInsufficientCapacity, Message: "full"}}
				return s
			},
			wantPhase: cachev1alpha1.PhasePending, wantReady: cachev1alpha1.ReasonInsufficientCapacity,
		},
		"servers starting": {
			scope:     func() *scope { return newScope(instanceWith(3, 1)) },
			wantPhase: cachev1alpha1.PhaseProvisioning, wantReady: cachev1alpha1.ReasonServersNotReady,
		},
		"all servers ready, nothing to preload": {
			scope:     func() *scope { return newScope(instanceWith(2, 2)) },
			wantPhase: cachev1alpha1.PhaseReady, wantReady: cachev1alpha1.ReasonAsExpected,
		},
		"all servers ready, preload pending": {
			scope: func() *scope {
				inst := instanceWith(2, 2)
				inst.Spec.Preload = []cachev1alpha1.AbsolutePath{"/lus/a"}
				return newScope(inst)
			},
			wantPhase: cachev1alpha1.PhasePreloading, wantReady: cachev1alpha1.ReasonPreloading,
		},
		"preload failed": {
			scope: func() *scope {
				inst := instanceWith(1, 1)
				inst.Spec.Preload = []cachev1alpha1.AbsolutePath{"/lus/a"}
				s := newScope(inst)
				s.preloadErr = errors.New("no such file")
				return s
			},
			wantPhase: cachev1alpha1.PhasePreloading, wantReady: cachev1alpha1.ReasonPreloadFailed,
		},
		"deleted while a pod mounts it": {
			scope: func() *scope {
				inst := instanceWith(1, 1)
				inst.DeletionTimestamp = &deleted
				inst.Status.ActiveMounts = []cachev1alpha1.Mount{{Pod: "job", Node: "n1"}}
				return newScope(inst)
			},
			wantPhase: cachev1alpha1.PhaseFlushing, wantReady: cachev1alpha1.ReasonFlushing, wantFlushed: cachev1alpha1.ReasonWaitingForUnmount,
		},
		"deleted, flush failing": {
			scope: func() *scope {
				inst := instanceWith(1, 1)
				inst.DeletionTimestamp = &deleted
				s := newScope(inst)
				s.flushErr = errors.New("EACCES")
				return s
			},
			wantPhase: cachev1alpha1.PhaseFlushing, wantReady: cachev1alpha1.ReasonFlushing, wantFlushed: cachev1alpha1.ReasonFlushFailed,
		},
		"deleted, data discarded": {
			scope: func() *scope {
				inst := instanceWith(1, 1)
				inst.DeletionTimestamp = &deleted
				inst.Status.Conditions = []metav1.Condition{{Type: cachev1alpha1.ConditionFlushed, Status: metav1.ConditionFalse, Reason: cachev1alpha1.ReasonDiscarded}}
				return newScope(inst)
			},
			wantPhase: cachev1alpha1.PhaseDeleting, wantReady: cachev1alpha1.ReasonFlushing, wantFlushed: cachev1alpha1.ReasonDiscarded,
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := tc.scope()
			setConditions(s, now)
			got := map[string]string{}
			for _, c := range s.inst.Status.Conditions {
				got[c.Type] = c.Reason
				if c.ObservedGeneration != 3 && c.Type != cachev1alpha1.ConditionFlushed {
					t.Errorf("condition %s has observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
				}
			}
			if s.inst.Status.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", s.inst.Status.Phase, tc.wantPhase)
			}
			if got[cachev1alpha1.ConditionReady] != tc.wantReady {
				t.Errorf("Ready reason %q, want %q", got[cachev1alpha1.ConditionReady], tc.wantReady)
			}
			if got[cachev1alpha1.ConditionFlushed] != tc.wantFlushed {
				t.Errorf("Flushed reason %q, want %q", got[cachev1alpha1.ConditionFlushed], tc.wantFlushed)
			}
		})
	}
}

func TestSumUsage(t *testing.T) {
	got := sumUsage(map[int]control.Stats{
		0: {CapacityBytes: 100, CachedBytes: 40, DirtyBytes: 10, Hits: 3, Misses: 1, CopyUpBytes: 7, WriteBackBytes: 5, WriteBackLagSeconds: 2.5,
			CopyUps: 3, CopyUpSeconds: 0.012},
		1: {CapacityBytes: 100, CachedBytes: 20, DirtyBytes: 0, Hits: 6, Misses: 0, CopyUpBytes: 1, WriteBackBytes: 9, WriteBackLagSeconds: 9.9,
			CopyUps: 1, CopyUpSeconds: 0.008},
	})
	want := map[string]int64{"capacity": 200, "cached": 60, "dirty": 10, "hits": 9, "misses": 1, "copyUp": 8, "writeBack": 14, "lag": 9}
	gotm := map[string]int64{"capacity": got.Capacity.Value(), "cached": got.Cached.Value(), "dirty": got.Dirty.Value(),
		"hits": got.Hits, "misses": got.Misses, "copyUp": got.CopyUpBytes, "writeBack": got.WriteBackBytes, "lag": got.WriteBackLagSeconds}
	if diff := cmp.Diff(want, gotm); diff != "" {
		t.Errorf("sumUsage (-want +got):\n%s", diff)
	}
	// 4 copy-ups took 20 ms in all; nothing was written back.
	if got.CopyUpLatency != "5.00ms" || got.WriteBackLatency != "" {
		t.Errorf("latencies %q and %q, want 5.00ms and none", got.CopyUpLatency, got.WriteBackLatency)
	}
	if got.HitRatio != "90.0%" {
		t.Errorf("hit ratio %q, want 90.0%%", got.HitRatio)
	}
}

// TestDirtyOfAServerThatDoesNotAnswerStays: usage.dirty keeps counting
// what a server that stopped answering held when it last answered, since
// that data is still on its SSD, and each server's own dirty data is
// recorded as it answers.
func TestDirtyOfAServerThatDoesNotAnswerStays(t *testing.T) {
	servers := instanceWith(3, 3).Status.Servers
	u := usageOf(servers, map[int]control.Stats{
		0: {CapacityBytes: 100, DirtyBytes: 10},
		1: {CapacityBytes: 100, DirtyBytes: 30},
		2: {CapacityBytes: 100, DirtyBytes: 0},
	})
	if got := u.Dirty.Value(); got != 40 {
		t.Fatalf("usage.dirty with every server answering: %d, want 40", got)
	}
	u = usageOf(servers, map[int]control.Stats{
		0: {CapacityBytes: 100, DirtyBytes: 5},
		2: {CapacityBytes: 100, DirtyBytes: 1},
	})
	if got := u.Dirty.Value(); got != 36 {
		t.Fatalf("usage.dirty with server 1 silent: %d, want 36 (its last 30 counted)", got)
	}
	want := []int64{5, 30, 1}
	for i, srv := range servers {
		if srv.Dirty == nil || srv.Dirty.Value() != want[i] {
			t.Fatalf("servers[%d].dirty = %v, want %d", i, srv.Dirty, want[i])
		}
	}
}

func TestPickNodes(t *testing.T) {
	free := map[string]int64{"a": 100, "b": 300, "c": 200, "d": 50}
	for name, tc := range map[string]struct {
		need int64
		n    int
		want []string
	}{
		"most free first":      {need: 100, n: 2, want: []string{"b", "c"}},
		"only nodes that fit":  {need: 150, n: 3, want: []string{"b", "c"}},
		"ties keep name order": {need: 10, n: 4, want: []string{"b", "c", "a", "d"}},
		"none fits":            {need: 400, n: 1, want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			got := pickNodes([]string{"a", "b", "c", "d"}, free, tc.need, tc.n)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pickNodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDropReason(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		teardown   *cachev1alpha1.Teardown
		now        time.Time
		wantReason string
	}{
		"write back by default":      {now: start.Add(time.Hour)},
		"discard when asked":         {teardown: &cachev1alpha1.Teardown{Policy: cachev1alpha1.TeardownDiscard}, now: start, wantReason: cachev1alpha1.ReasonDiscarded},
		"timeout not yet passed":     {teardown: &cachev1alpha1.Teardown{Timeout: &metav1.Duration{Duration: time.Hour}}, now: start.Add(59 * time.Minute)},
		"timeout passed":             {teardown: &cachev1alpha1.Teardown{Timeout: &metav1.Duration{Duration: time.Hour}}, now: start.Add(time.Hour), wantReason: cachev1alpha1.ReasonFlushTimedOut},
		"write back ignores the age": {teardown: &cachev1alpha1.Teardown{Policy: cachev1alpha1.TeardownWriteBack}, now: start.Add(1000 * time.Hour)},
	} {
		t.Run(name, func(t *testing.T) {
			inst := instanceWith(1, 1)
			inst.Spec.Teardown = tc.teardown
			inst.Status.Flush = &cachev1alpha1.FlushStatus{StartedAt: &metav1.Time{Time: start}}
			if got, _ := dropReason(inst, tc.now); got != tc.wantReason {
				t.Errorf("dropReason = %q, want %q", got, tc.wantReason)
			}
		})
	}
}

// TestTransition: the Events a condition that is True when something is
// wrong records as it changes. A change of reason while True is a new
// trouble, not the end of the old one.
func TestTransition(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: cachev1alpha1.ConditionReadOnly, Status: status, Reason: reason}
	}
	on, off := metav1.ConditionTrue, metav1.ConditionFalse
	for name, tc := range map[string]struct {
		old, cur *metav1.Condition
		want     string
	}{
		"first pass, fine":         {nil, cond(off, cachev1alpha1.ReasonAsExpected), ""},
		"first pass, wrong":        {nil, cond(on, cachev1alpha1.ReasonWriteWindowExceeded), corev1.EventTypeWarning},
		"turns wrong":              {cond(off, cachev1alpha1.ReasonAsExpected), cond(on, cachev1alpha1.ReasonWriteWindowExceeded), corev1.EventTypeWarning},
		"stays wrong":              {cond(on, cachev1alpha1.ReasonWriteWindowExceeded), cond(on, cachev1alpha1.ReasonWriteWindowExceeded), ""},
		"wrong for another reason": {cond(on, cachev1alpha1.ReasonWriteWindowExceeded), cond(on, cachev1alpha1.ReasonCacheDeviceFailed), corev1.EventTypeWarning},
		"fine again":               {cond(on, cachev1alpha1.ReasonCacheDeviceFailed), cond(off, cachev1alpha1.ReasonAsExpected), corev1.EventTypeNormal},
		"stays fine":               {cond(off, cachev1alpha1.ReasonAsExpected), cond(off, cachev1alpha1.ReasonAsExpected), ""},
		"not computed":             {cond(on, cachev1alpha1.ReasonCacheDeviceFailed), nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := transition(tc.old, tc.cur); got != tc.want {
				t.Errorf("transition = %q, want %q", got, tc.want)
			}
		})
	}
}
