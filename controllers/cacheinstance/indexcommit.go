package cacheinstance

import (
	"fmt"
	"strings"
	"time"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
)

// setIndexCommitCondition says whether a server cannot commit its cache
// index, naming the servers and their errors. It is left as it was in a
// pass in which no server answered.
func setIndexCommitCondition(s *scope, now time.Time) {
	if len(s.stats) == 0 {
		return
	}
	failing := serversWhere(s, func(st control.Stats) (string, bool) { return st.IndexError, st.IndexError != "" })
	if len(failing) == 0 {
		setCondition(s, now, cachev1alpha1.ConditionIndexCommitFailing, false, cachev1alpha1.ReasonAsExpected,
			"every server commits its cache index")
		return
	}
	setCondition(s, now, cachev1alpha1.ConditionIndexCommitFailing, true, cachev1alpha1.ReasonIndexCommitErrors,
		fmt.Sprintf("the cache index cannot be committed on %s: fsync fails with that error there, and so do writes that need cache space freed since; nothing is lost, and the server retries every second until the node's cache disk has room",
			strings.Join(failing, ", ")))
}

// recordIndexCommitTransition records an Event when a server's index
// commits start failing, or work again.
func (r *Reconciler) recordIndexCommitTransition(s *scope) {
	action := func(string) string { return "IndexCommit" }
	r.recordTransition(s, cachev1alpha1.ConditionIndexCommitFailing, action, "Index commits failing", "Index commits work again")
}
