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

// TestIndexCommitCondition: a server whose index commits fail makes the
// condition True, naming the server and its error, and only that server.
func TestIndexCommitCondition(t *testing.T) {
	const full = "write /cache/index.db: no space left on device"
	for name, tc := range map[string]struct {
		stats      map[int]control.Stats
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		"committing": {map[int]control.Stats{0: {}, 1: {IndexCommitFailures: 4}}, metav1.ConditionFalse, cachev1alpha1.ReasonAsExpected},
		"failing":    {map[int]control.Stats{0: {}, 1: {IndexError: full, IndexCommitFailures: 4}}, metav1.ConditionTrue, cachev1alpha1.ReasonIndexCommitErrors},
	} {
		t.Run(name, func(t *testing.T) {
			s := newScope(instanceWith(2, 2))
			s.stats = tc.stats
			setIndexCommitCondition(s, time.Now())
			c := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionIndexCommitFailing)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Fatalf("IndexCommitFailing condition = %+v, want %s with reason %s", c, tc.wantStatus, tc.wantReason)
			}
			if tc.wantStatus == metav1.ConditionTrue && (!strings.Contains(c.Message, serverName(1)+" ("+full+")") || strings.Contains(c.Message, serverName(0))) {
				t.Errorf("message %q does not name %s and its error alone", c.Message, serverName(1))
			}
		})
	}
}
