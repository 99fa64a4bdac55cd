package policy

import (
	"fmt"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// identityAllowed reports whether the rule allows runAs: the uid in
// uidRanges, the gid and every supplemental group in gidRanges, and uid or
// gid 0 only with allowRoot.
func identityAllowed(r cachev1alpha1.AccessRule, id cachev1alpha1.RunAs) bool {
	if !r.AllowRoot && (id.UID == 0 || id.GID == 0) {
		return false
	}
	if !inRanges(id.UID, r.UIDRanges) || !inRanges(id.GID, r.GIDRanges) {
		return false
	}
	for _, g := range id.SupplementalGroups {
		if (g == 0 && !r.AllowRoot) || !inRanges(g, r.GIDRanges) {
			return false
		}
	}
	return true
}

func inRanges(id int64, ranges []cachev1alpha1.IDRange) bool {
	for _, r := range ranges {
		if id >= r.Min && id <= r.Max {
			return true
		}
	}
	return false
}

// identity formats runAs for messages, as uid:gid[+groups].
func identity(id cachev1alpha1.RunAs) string {
	s := fmt.Sprintf("%d:%d", id.UID, id.GID)
	if len(id.SupplementalGroups) > 0 {
		s += fmt.Sprintf("+%v", id.SupplementalGroups)
	}
	return s
}
