package policy

import (
	"testing"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestBackingBeneath(t *testing.T) {
	for name, tc := range map[string]struct {
		edit     edit
		nsLabels map[string]string
		want     string
	}{
		"the prefix that grants the path": {want: "/lus/global/projects/climate"},
		"the shortest of two granting prefixes": {
			edit: func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
				r := &p.Spec.BackingFilesystems[0].AccessRules[0]
				r.PathPrefixes = append([]cachev1alpha1.AbsolutePath{"/lus/global/projects/climate/run1"}, r.PathPrefixes...)
			},
			want: "/lus/global/projects/climate",
		},
		"a rule that grants the path to another identity does not count": {
			edit: func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
				p.Spec.BackingFilesystems[0].AccessRules = append(p.Spec.BackingFilesystems[0].AccessRules, cachev1alpha1.AccessRule{
					Namespaces: []string{"climate"}, PathPrefixes: []cachev1alpha1.AbsolutePath{"/lus/global/projects"},
					UIDRanges: []cachev1alpha1.IDRange{{Min: 7000, Max: 7000}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 7000, Max: 7000}},
				})
			},
			want: "/lus/global/projects/climate",
		},
		"a prefix above the mount point stops at it": {
			edit: func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
				p.Spec.BackingFilesystems[0].AccessRules[0].PathPrefixes = []cachev1alpha1.AbsolutePath{"/"}
			},
			want: "/lus/global",
		},
		"no rule grants it any more: the mount point": {edit: setID(5000, 5000), want: "/lus/global"},
		"a prefix granted by namespace labels": {
			edit: inNamespace("other", "/lus/global/gold/x", 0, 0), nsLabels: map[string]string{"tier": "gold"},
			want: "/lus/global/gold",
		},
	} {
		t.Run(name, func(t *testing.T) {
			inst, pool := testInstance(), testPool()
			if tc.edit != nil {
				tc.edit(inst, pool)
			}
			if got := BackingBeneath(inst, pool, tc.nsLabels); got != tc.want {
				t.Errorf("BackingBeneath = %q, want %q", got, tc.want)
			}
		})
	}
	scratch := testInstance()
	scratch.Spec.Backing = nil
	if got := BackingBeneath(scratch, testPool(), nil); got != "" {
		t.Errorf("BackingBeneath of a scratch instance = %q, want none", got)
	}
}
