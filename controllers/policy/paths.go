package policy

import (
	"path"
	"strings"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// isClean reports whether p is absolute and already in the form path.Clean
// gives it; only such paths can be compared with prefixes as strings.
func isClean(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p
}

// under reports whether p is prefix or inside it, after cleaning both. A
// prefix matches whole path elements only: /lus/ab is not under /lus/a.
func under(p, prefix string) bool {
	p, prefix = path.Clean(p), path.Clean(prefix)
	if prefix == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// BackingBeneath returns the directory that the instance's backing
// directory must stay beneath once its symbolic links are followed: the
// shortest path prefix of the access rules that grant the backing path to
// the instance's namespace for its runAs, or, when none does any more (the
// pool changed since admission, and the servers must still write back),
// the file system's mountPath. Admission compares paths as strings; only a
// server can see where a link below the prefix leads, so it is told the
// prefix. It is "" for an instance without a backing path.
func BackingBeneath(inst *cachev1alpha1.CacheInstance, pool *cachev1alpha1.CachePool, nsLabels map[string]string) string {
	b := inst.Spec.Backing
	if b == nil {
		return ""
	}
	fs := findFilesystem(pool, b.Filesystem)
	if fs == nil {
		return ""
	}
	mount := path.Clean(string(fs.MountPath))
	best, found := mount, false
	for _, r := range grantingRules(fs, inst.Namespace, string(b.Path), nsLabels) {
		if !identityAllowed(r, inst.Spec.RunAs) {
			continue
		}
		for _, prefix := range r.PathPrefixes {
			// A prefix above the mount point grants the whole file system.
			p := path.Clean(string(prefix))
			if under(mount, p) {
				p = mount
			}
			if under(string(b.Path), p) && (!found || len(p) < len(best)) {
				best, found = p, true
			}
		}
	}
	return best
}
