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

// TestWriteBackCondition: a server whose write-back keeps failing makes the
// condition True, naming the server and its error; a refusal of the backing
// file system comes first, since writes fail then.
func TestWriteBackCondition(t *testing.T) {
	const quota = "writing back extent 3 of out/a: write out/a: disk quota exceeded"
	const down = "writing back extent 0 of out/b: write out/b: input/output error"
	for name, tc := range map[string]struct {
		stats      map[int]control.Stats
		wantStatus metav1.ConditionStatus
		wantReason string
		wantInMsg  []string
		notInMsg   []string
	}{
		"works": {
			stats:      map[int]control.Stats{0: {}, 1: {WriteBackErrors: 3, LastWriteBackError: down}},
			wantStatus: metav1.ConditionFalse, wantReason: cachev1alpha1.ReasonAsExpected,
		},
		"failing": {
			stats:      map[int]control.Stats{0: {}, 1: {WriteBackFailing: true, LastWriteBackError: down}},
			wantStatus: metav1.ConditionTrue, wantReason: cachev1alpha1.ReasonWriteBackErrors,
			wantInMsg: []string{serverName(1), down}, notInMsg: []string{serverName(0)},
		},
		"refused": {
			stats: map[int]control.Stats{
				0: {WriteBackFailing: true, WriteBackRefused: true, LastWriteBackError: quota},
				1: {WriteBackFailing: true, LastWriteBackError: down},
			},
			wantStatus: metav1.ConditionTrue, wantReason: cachev1alpha1.ReasonWriteBackRefused,
			wantInMsg: []string{serverName(0), quota, "EDQUOT"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newScope(instanceWith(2, 2))
			s.stats = tc.stats
			setWriteBackCondition(s, time.Now())
			c := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionWriteBackFailing)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Fatalf("WriteBackFailing condition = %+v, want %s with reason %s", c, tc.wantStatus, tc.wantReason)
			}
			for _, want := range tc.wantInMsg {
				if !strings.Contains(c.Message, want) {
					t.Errorf("message %q does not say %q", c.Message, want)
				}
			}
			for _, not := range tc.notInMsg {
				if strings.Contains(c.Message, not) {
					t.Errorf("message %q names %q", c.Message, not)
				}
			}
		})
	}
}

// TestWriteBackConditionKeptWithoutStats: a pass in which no server
// answered leaves the condition as it was.
func TestWriteBackConditionKeptWithoutStats(t *testing.T) {
	s := newScope(instanceWith(2, 2))
	s.stats = map[int]control.Stats{0: {WriteBackFailing: true, WriteBackRefused: true, LastWriteBackError: "full"}}
	setWriteBackCondition(s, time.Now())
	s.stats = nil
	setWriteBackCondition(s, time.Now())
	if c := meta.FindStatusCondition(s.inst.Status.Conditions, cachev1alpha1.ConditionWriteBackFailing); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("condition after a pass without statistics = %+v, want it kept True", c)
	}
}
