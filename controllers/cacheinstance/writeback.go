package cacheinstance

import (
	"fmt"
	"strings"
	"time"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// setWriteBackCondition says whether write-back keeps failing on a server,
// naming the servers and their latest errors. It is left as it was in a
// pass in which no server answered.
func setWriteBackCondition(s *scope, now time.Time) {
	if len(s.stats) == 0 {
		return
	}
	refused := serversWhere(s, func(st control.Stats) (string, bool) {
		return st.LastWriteBackError, st.WriteBackFailing && st.WriteBackRefused
	})
	failing := serversWhere(s, func(st control.Stats) (string, bool) {
		return st.LastWriteBackError, st.WriteBackFailing && !st.WriteBackRefused
	})
	switch {
	case len(refused) > 0:
		setCondition(s, now, cachev1alpha1.ConditionWriteBackFailing, true, cachev1alpha1.ReasonWriteBackRefused,
			fmt.Sprintf("the backing file system refuses the write-back of %s: writes that need cache space held by dirty data fail with its error (ENOSPC, EDQUOT or EROFS), and reads of data not cached go to it directly; the dirty data stays cached and goes back once there is room",
				strings.Join(refused, ", ")))
	case len(failing) > 0:
		setCondition(s, now, cachev1alpha1.ConditionWriteBackFailing, true, cachev1alpha1.ReasonWriteBackErrors,
			fmt.Sprintf("write-back to the backing file system keeps failing on %s; the dirty data stays cached and is retried with backoff",
				strings.Join(failing, ", ")))
	default:
		setCondition(s, now, cachev1alpha1.ConditionWriteBackFailing, false, cachev1alpha1.ReasonAsExpected,
			"write-back to the backing file system works")
	}
}

// recordWriteBackTransition records an Event when write-back starts
// failing, or fails for another reason, or works again.
func (r *Reconciler) recordWriteBackTransition(s *scope) {
	action := func(string) string { return "WriteBack" }
	r.recordTransition(s, cachev1alpha1.ConditionWriteBackFailing, action, "Write-back failing", "Write-back works again")
}
