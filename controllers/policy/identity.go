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

// SoleIdentity returns the identity the pool maps to the instance's
// namespace for its backing path (any file system's rules for a scratch
// instance), when the rules that grant it map exactly one uid and one gid,
// with no supplemental groups. It is how an instance made for a volume that
// names no identity gets one: never from what the user wrote, only from
// what the admin mapped.
func SoleIdentity(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string) (cachev1alpha1.RunAs, bool) {
	var found []cachev1alpha1.RunAs
	for _, r := range identityRules(inst, pool, nsLabels) {
		id, ok := singleIdentity(r)
		if !ok {
			return cachev1alpha1.RunAs{}, false
		}
		found = append(found, id)
	}
	if len(found) == 0 {
		return cachev1alpha1.RunAs{}, false
	}
	for _, id := range found[1:] {
		if id.UID != found[0].UID || id.GID != found[0].GID {
			return cachev1alpha1.RunAs{}, false
		}
	}
	return found[0], true
}

// identityRules returns the rules that grant the instance's backing path to
// its namespace, or for a scratch instance every rule for the namespace.
func identityRules(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string) []cachev1alpha1.AccessRule {
	if b := inst.Spec.Backing; b != nil {
		fs := findFilesystem(pool, b.Filesystem)
		if fs == nil {
			return nil
		}
		return grantingRules(fs, inst.Namespace, string(b.Path), nsLabels)
	}
	var out []cachev1alpha1.AccessRule
	for i := range pool.Spec.BackingFilesystems {
		for _, r := range pool.Spec.BackingFilesystems[i].AccessRules {
			if namespaceMatches(r, inst.Namespace, nsLabels) {
				out = append(out, r)
			}
		}
	}
	return out
}

func singleIdentity(r cachev1alpha1.AccessRule) (cachev1alpha1.RunAs, bool) {
	if len(r.UIDRanges) != 1 || len(r.GIDRanges) != 1 ||
		r.UIDRanges[0].Min != r.UIDRanges[0].Max || r.GIDRanges[0].Min != r.GIDRanges[0].Max {
		return cachev1alpha1.RunAs{}, false
	}
	id := cachev1alpha1.RunAs{UID: r.UIDRanges[0].Min, GID: r.GIDRanges[0].Min}
	return id, identityAllowed(r, id)
}

// CallerIDs returns the user and group ids the pool maps to the instance's
// namespace for its backing path: the ranges of every rule that grants the
// path and allows the instance's runAs. An instance running as root acts
// as each calling process, and only as these ids.
func CallerIDs(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string) (uids, gids []cachev1alpha1.IDRange) {
	for _, r := range identityRules(inst, pool, nsLabels) {
		if identityAllowed(r, inst.Spec.RunAs) {
			uids = append(uids, r.UIDRanges...)
			gids = append(gids, r.GIDRanges...)
		}
	}
	return uids, gids
}
