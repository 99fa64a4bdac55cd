package instances

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers/policy"
	"github.com/burstcache/burstcache/csi-driver/params"
)

func TestCheck(t *testing.T) {
	tests := map[string]struct {
		vs   policy.Violations
		want error
	}{
		"accepted":         {},
		"path":             {vs: policy.Violations{{Reason: cachev1alpha1.ReasonPathNotAllowed, Field: "spec.backing.path"}}, want: ErrInvalid},
		"capacity ceiling": {vs: policy.Violations{{Reason: cachev1alpha1.ReasonExceedsCeiling, Field: "spec.capacity"}}, want: ErrNoCapacity},
		"capacity and path": {vs: policy.Violations{
			{Reason: cachev1alpha1.ReasonPathNotAllowed, Field: "spec.backing.path"},
			{Reason: cachev1alpha1.ReasonInsufficientCapacity, Field: "spec.capacity"},
		}, want: ErrNoCapacity},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := check(tc.vs)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("check() = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFillBacking(t *testing.T) {
	one := &cachev1alpha1.CachePool{Spec: cachev1alpha1.CachePoolSpec{BackingFilesystems: []cachev1alpha1.BackingFilesystem{{Name: "lustre"}}}}
	two := one.DeepCopy()
	two.Spec.BackingFilesystems = append(two.Spec.BackingFilesystems, cachev1alpha1.BackingFilesystem{Name: "nfs"})
	inst := &cachev1alpha1.CacheInstance{Spec: cachev1alpha1.CacheInstanceSpec{Backing: &cachev1alpha1.BackingPath{Path: "/lus/a"}}}
	if err := fillBacking(inst.DeepCopy(), two); !errors.Is(err, ErrInvalid) {
		t.Errorf("fillBacking(two file systems) = %v, want ErrInvalid", err)
	}
	if err := fillBacking(inst, one); err != nil || inst.Spec.Backing.Filesystem != "lustre" {
		t.Errorf("fillBacking(one file system) = %v, file system %q", err, inst.Spec.Backing.Filesystem)
	}
}

func TestDigestTellsRequestsApart(t *testing.T) {
	p := &params.Params{Pool: "fast"}
	base := Request{Name: "pvc-1", Namespace: "a", Claim: "data", Capacity: resource.MustParse("1Gi"), Params: p}
	same := base
	same.Capacity = resource.MustParse("1024Mi")
	bigger := base
	bigger.Capacity = resource.MustParse("2Gi")
	if digest(base) != digest(same) {
		t.Error("digest tells 1Gi from 1024Mi: a retry written differently would conflict")
	}
	if digest(base) == digest(bigger) {
		t.Error("digest does not see the capacity")
	}
}
