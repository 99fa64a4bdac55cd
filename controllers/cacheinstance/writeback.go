package cacheinstance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// setWriteBackCondition says whether write-back keeps failing on a server,
// naming the servers and their latest errors. It is left as it was in a
// pass in which no server answered.
func setWriteBackCondition(s *scope, now time.Time) {
	if len(s.stats) == 0 {
		return
	}
	var refused, failing []string
	for i, st := range s.stats {
		if i >= len(s.inst.Status.Servers) || !st.WriteBackFailing {
			continue
		}
		named := fmt.Sprintf("%s (%s)", s.inst.Status.Servers[i].Name, st.LastWriteBackError)
		if st.WriteBackRefused {
			refused = append(refused, named)
		} else {
			failing = append(failing, named)
		}
	}
	slices.Sort(refused)
	slices.Sort(failing)
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

// setIndexCommitCondition says whether a server cannot commit its cache
// index, naming the servers and their errors. It is left as it was in a
// pass in which no server answered.
func setIndexCommitCondition(s *scope, now time.Time) {
	if len(s.stats) == 0 {
		return
	}
	var failing []string
	for i, st := range s.stats {
		if i < len(s.inst.Status.Servers) && st.IndexError != "" {
			failing = append(failing, fmt.Sprintf("%s (%s)", s.inst.Status.Servers[i].Name, st.IndexError))
		}
	}
	slices.Sort(failing)
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
