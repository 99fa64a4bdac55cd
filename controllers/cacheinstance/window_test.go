package cacheinstance

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// TestReadOnlyCondition: a failed cache device on any server makes the
// instance read-only, naming the server and the error, before a used-up
// write window does.
func TestReadOnlyCondition(t *testing.T) {
	const deviceErr = "cache device failed: fdatasync of the slab: input/output error"
	for name, tc := range map[string]struct {
		stats      map[int]control.Stats
		wantStatus metav1.ConditionStatus
		wantReason string
		wantInMsg  []string
	}{
		"writable": {
			stats:      map[int]control.Stats{0: {}, 1: {}},
			wantStatus: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonAsExpected,
		},
		"window used up": {
			stats:      map[int]control.Stats{0: {ReadOnly: true}, 1: {}},
			wantStatus: metav1.ConditionTrue, wantReason: cachev1alpha1.ReasonWriteWindowExceeded,
			wantInMsg: []string{serverName(0), "EROFS"},
		},
		"device failed": {
			stats:      map[int]control.Stats{0: {ReadOnly: true}, 1: {CacheDeviceError: deviceErr}},
			wantStatus: metav1.ConditionTrue, wantReason: cachev1alpha1.ReasonCacheDeviceFailed,
			wantInMsg: []string{serverName(1), deviceErr, "EIO"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newScope(instanceWith(2, 2))
			s.stats = tc.stats
			setReadOnlyCondition(s, time.Now())
			c := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionReadOnly)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Fatalf("ReadOnly condition = %+v, want %s with reason %s", c, tc.wantStatus, tc.wantReason)
			}
			for _, want := range tc.wantInMsg {
				if !strings.Contains(c.Message, want) {
					t.Errorf("message %q does not say %q", c.Message, want)
				}
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
