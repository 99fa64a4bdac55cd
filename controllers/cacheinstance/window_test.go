package cacheinstance

import (
	"strings"
	"testing"
	"time"

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
