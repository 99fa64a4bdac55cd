package params

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestParse(t *testing.T) {
	base := map[string]string{Pool: "fast", BackingFilesystem: "lustre", BackingPath: "/lus/proj"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	q := resource.MustParse("1Gi")
	tests := map[string]struct {
		sc, pvc map[string]string
		want    *Params
		wantErr string
	}{
		"dynamic with knobs from both": {
			sc: with(base, DirtyHighWatermark, "80", Durability, "Backing", "csi.storage.k8s.io/pvc/name", "data"),
			pvc: map[string]string{
				AnnotationPrefix + BackingPath: "/lus/proj/run", AnnotationPrefix + MaxFileSize: "1Gi",
				AnnotationPrefix + WriteWindowLength: "2h", AnnotationPrefix + Preload: "/lus/proj/run/a, /lus/proj/run/b",
				AnnotationPrefix + RunAsUID: "1000", AnnotationPrefix + RunAsGID: "1001", AnnotationPrefix + SupplementalGroups: "5,6",
				"unrelated.io/x": "y",
			},
			want: &Params{Pool: "fast", RunAsSet: true, Spec: cachev1alpha1.CacheInstanceSpec{
				Backing:   &cachev1alpha1.BackingPath{Filesystem: "lustre", Path: "/lus/proj/run"},
				Limits:    &cachev1alpha1.Limits{MaxFileSize: &q, WriteWindow: &cachev1alpha1.WriteWindow{Length: &metav1.Duration{Duration: 2 * time.Hour}}},
				WriteBack: &cachev1alpha1.WriteBack{DirtyHighWatermark: ptr(int32(80)), Durability: cachev1alpha1.DurabilityBacking},
				Preload:   []cachev1alpha1.AbsolutePath{"/lus/proj/run/a", "/lus/proj/run/b"},
				RunAs:     cachev1alpha1.RunAs{UID: 1000, GID: 1001, SupplementalGroups: []int64{5, 6}},
			}},
		},
		"scratch needs no backing path": {
			sc:   map[string]string{Pool: "fast", Type: "scratch", AccessMode: "LoadBalanced"},
			want: &Params{Pool: "fast", Spec: cachev1alpha1.CacheInstanceSpec{Type: cachev1alpha1.CacheTypeScratch, AccessMode: cachev1alpha1.AccessModeLoadBalanced}},
		},
		"named": {
			sc:   map[string]string{Instance: "shared", Pool: "fast"},
			pvc:  map[string]string{AnnotationPrefix + SubPath: "out/run1"},
			want: &Params{Pool: "fast", Instance: "shared", SubPath: "out/run1"},
		},
		"unknown parameter":      {sc: with(base, "backingpath", "/x"), wantErr: `unknown StorageClass parameter "backingpath"`},
		"unknown annotation":     {sc: base, pvc: map[string]string{AnnotationPrefix + "capacity": "1Ti"}, wantErr: "unknown PVC annotation"},
		"pool from the PVC":      {sc: base, pvc: map[string]string{AnnotationPrefix + Pool: "other"}, wantErr: "StorageClass only"},
		"missing backing path":   {sc: map[string]string{Pool: "fast"}, wantErr: "missing backingPath"},
		"missing pool":           {sc: map[string]string{BackingPath: "/lus/a"}, wantErr: "missing pool"},
		"relative backing path":  {sc: with(base, BackingPath, "lus/a"), wantErr: "absolute"},
		"unclean backing path":   {sc: with(base, BackingPath, "/lus/a/../../etc"), wantErr: "absolute, clean"},
		"bad type":               {sc: with(base, Type, "Cache"), wantErr: "want one of cache, scratch"},
		"bad watermark":          {sc: with(base, DirtyLowWatermark, "101"), wantErr: "percentage"},
		"zero watermark":         {sc: with(base, EvictionLowWatermark, "0"), wantErr: "percentage from 1 to 100"},
		"too many threads":       {sc: with(base, WriteBackThreads, "65"), wantErr: "from 1 to 64"},
		"too large a multiplier": {sc: with(base, WriteWindowMultiplier, "1001"), wantErr: "from 1 to 1000"},
		"bad quantity":           {sc: with(base, MaxFileSize, "-1"), wantErr: "positive quantity"},
		"bad duration":           {sc: with(base, WriteWindowLength, "forever"), wantErr: "duration"},
		"bad uid":                {sc: with(base, RunAsUID, "-1", RunAsGID, "1"), wantErr: "POSIX id"},
		"uid without gid":        {sc: with(base, RunAsUID, "1000"), wantErr: "go together"},
		"instance of another ns": {sc: map[string]string{Instance: "team-b/shared"}, wantErr: "another namespace"},
		"knob on a named volume": {sc: base, pvc: map[string]string{AnnotationPrefix + Instance: "shared", AnnotationPrefix + BackingPath: "/lus/a"}, wantErr: "does not apply"},
		"class knobs and a named claim": {
			sc: base, pvc: map[string]string{AnnotationPrefix + Instance: "shared"},
			want: &Params{Pool: "fast", Instance: "shared", Spec: cachev1alpha1.CacheInstanceSpec{Backing: &cachev1alpha1.BackingPath{Filesystem: "lustre", Path: "/lus/proj"}}},
		},
		"sub-path escaping": {sc: map[string]string{Instance: "shared", SubPath: "../other"}, wantErr: "relative path inside"},
		"absolute sub-path": {sc: map[string]string{Instance: "shared", SubPath: "/etc"}, wantErr: "relative path inside"},
		"relative preload":  {sc: with(base, Preload, "/lus/proj/a,b"), wantErr: "absolute"},
		"preload as a JSON array": {
			sc: with(base, Preload, ` ["/lus/proj/a,b", "/lus/proj/ c "]`),
			want: &Params{Pool: "fast", Spec: cachev1alpha1.CacheInstanceSpec{
				Backing: &cachev1alpha1.BackingPath{Filesystem: "lustre", Path: "/lus/proj"},
				Preload: []cachev1alpha1.AbsolutePath{"/lus/proj/a,b", "/lus/proj/ c "},
			}},
		},
		"preload as a broken JSON array": {sc: with(base, Preload, `["/lus/proj/a"`), wantErr: "JSON array"},
		"preload as an empty JSON array": {sc: with(base, Preload, `[]`), wantErr: "at least one path"},
		"relative preload in an array":   {sc: with(base, Preload, `["/lus/proj/a", "b"]`), wantErr: "absolute"},
		"sidecar keys are ignored":       {sc: with(base, "csi.storage.k8s.io/pv/name", "pvc-1"), want: &Params{Pool: "fast", Spec: cachev1alpha1.CacheInstanceSpec{Backing: &cachev1alpha1.BackingPath{Filesystem: "lustre", Path: "/lus/proj"}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.sc, tc.pvc)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse() error = %v, want ErrInvalid with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSampleStorageClass parses the shipped sample class with the claim
// annotations its comment shows.
func TestSampleStorageClass(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "storageclass_climate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sc storagev1.StorageClass
	if err := yaml.UnmarshalStrict(raw, &sc); err != nil {
		t.Fatal(err)
	}
	p, err := Parse(sc.Parameters, map[string]string{
		AnnotationPrefix + BackingPath: "/lus/global/projects/climate/run-42", AnnotationPrefix + RunAsUID: "20017", AnnotationPrefix + RunAsGID: "20000",
	})
	if err != nil {
		t.Fatalf("Parse(sample) error = %v", err)
	}
	if p.Pool != "lustre-nvme" || p.Spec.WriteBack == nil || *p.Spec.WriteBack.Threads != 8 {
		t.Errorf("Parse(sample) = %+v, want pool lustre-nvme with 8 write-back threads", p)
	}
}
