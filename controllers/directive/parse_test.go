package directive

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

func TestParse(t *testing.T) {
	mfs := resource.MustParse("1Ti")
	mult := int32(5)
	for name, tc := range map[string]struct {
		text string
		want Request
	}{
		"cache with stage_in and a persistent instance": {
			text: `
#DW jobdw type=cache access_mode=striped pfs=/lus/global/run capacity=100TiB pool=nvme MFS=1TiB write_window_multiplier=5 write_window_length=3600 sync_to_pfs=yes
#DW stage_in source=/lus/global/run/input destination=$DW_JOB_STRIPED/input type=directory
#DW persistentdw name=shared-cache`,
			want: Request{
				Job: &cachev1alpha1.CacheInstanceSpec{
					Type: cachev1alpha1.CacheTypeCache, AccessMode: cachev1alpha1.AccessModeStriped,
					Pool: "nvme", Capacity: resource.MustParse("100Ti"),
					Backing: &cachev1alpha1.BackingPath{Path: "/lus/global/run"},
					Limits: &cachev1alpha1.Limits{MaxFileSize: &mfs,
						WriteWindow: &cachev1alpha1.WriteWindow{Multiplier: &mult, Length: &metav1.Duration{Duration: time.Hour}}},
					WriteBack: &cachev1alpha1.WriteBack{Durability: cachev1alpha1.DurabilityBacking},
					Preload:   []cachev1alpha1.AbsolutePath{"/lus/global/run/input"},
				},
				Persistent: []string{"shared-cache"},
			},
		},
		"load-balanced read cache in decimal units": {
			text: "#DW jobdw type=cache access_mode=ldbalance pfs=/data capacity=10GB",
			want: Request{Job: &cachev1alpha1.CacheInstanceSpec{
				Type: cachev1alpha1.CacheTypeCache, AccessMode: cachev1alpha1.AccessModeLoadBalanced,
				Capacity: resource.MustParse("10G"), Backing: &cachev1alpha1.BackingPath{Path: "/data"},
			}},
		},
		"scratch staged out": {
			text: "#DW jobdw type=scratch capacity=1TiB\n#DW stage_out source=$DW_JOB_STRIPED destination=/lus/global/results type=directory",
			want: Request{Job: &cachev1alpha1.CacheInstanceSpec{
				Type: cachev1alpha1.CacheTypeScratch, AccessMode: cachev1alpha1.AccessModeStriped, Capacity: resource.MustParse("1Ti"),
				StageOut: &cachev1alpha1.StageOut{Destination: cachev1alpha1.BackingPath{Path: "/lus/global/results"}},
			}},
		},
		"persistent only": {text: "#DW persistentdw name=a\n\n#DW persistentdw name=b", want: Request{Persistent: []string{"a", "b"}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.text)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	const job = "#DW jobdw type=cache pfs=/lus/run capacity=1TiB\n"
	for name, tc := range map[string]struct {
		text       string
		wantLine   int
		wantReason string
	}{
		"a shell line":                {"echo hello", 1, "not a #DW directive"},
		"another comment":             {"#SBATCH -N 4", 1, "not a #DW directive"},
		"a bare #DW":                  {"#DW", 1, "missing the directive name"},
		"an unknown directive":        {"#DW swap 10GiB", 1, "unknown directive"},
		"a token without a value":     {"#DW jobdw type=cache capacity", 1, "malformed option"},
		"a key given twice":           {"#DW jobdw type=cache type=scratch capacity=1TiB", 1, "given twice"},
		"an unknown option":           {"#DW jobdw type=cache pfs=/x capacity=1TiB color=blue", 1, "unknown option color"},
		"no capacity":                 {"#DW jobdw type=cache pfs=/x", 1, "missing option capacity"},
		"a bad capacity":              {"#DW jobdw type=cache pfs=/x capacity=lots", 1, "not a positive size"},
		"a zero capacity":             {"#DW jobdw type=cache pfs=/x capacity=0", 1, "not a positive size"},
		"an unknown type":             {"#DW jobdw type=swap capacity=1TiB", 1, "not cache or scratch"},
		"cache without pfs":           {"#DW jobdw type=cache capacity=1TiB", 1, "needs pfs="},
		"a relative pfs":              {"#DW jobdw type=cache pfs=lus/run capacity=1TiB", 1, "absolute, clean"},
		"a pfs with ..":               {"#DW jobdw type=cache pfs=/lus/run/../etc capacity=1TiB", 1, "absolute, clean"},
		"scratch with pfs":            {"#DW jobdw type=scratch pfs=/x capacity=1TiB", 1, "no pfs="},
		"private access mode":         {"#DW jobdw type=scratch access_mode=private capacity=1TiB", 1, "not supported"},
		"load-balanced scratch":       {"#DW jobdw type=scratch access_mode=ldbalance capacity=1TiB", 1, "needs type=cache"},
		"a bad MFS":                   {"#DW jobdw type=cache pfs=/x capacity=1TiB MFS=-1", 1, "not a positive size"},
		"a zero write window":         {"#DW jobdw type=cache pfs=/x capacity=1TiB write_window_multiplier=0", 1, "whole number"},
		"a huge write window":         {"#DW jobdw type=cache pfs=/x capacity=1TiB write_window_multiplier=5000", 1, "whole number"},
		"a write window in words":     {"#DW jobdw type=cache pfs=/x capacity=1TiB write_window_length=day", 1, "whole number"},
		"a bad sync_to_pfs":           {"#DW jobdw type=cache pfs=/x capacity=1TiB sync_to_pfs=maybe", 1, "not yes or no"},
		"two jobdw":                   {job + job, 2, "a second jobdw"},
		"stage_in before jobdw":       {"#DW stage_in source=/lus/run/a destination=$DW_JOB_STRIPED/a type=file", 1, "needs a jobdw type=cache"},
		"stage_in outside pfs":        {job + "#DW stage_in source=/etc/passwd destination=$DW_JOB_STRIPED/passwd type=file", 2, "not under pfs"},
		"stage_in by traversal":       {job + "#DW stage_in source=/lus/run/../secret destination=$DW_JOB_STRIPED/x type=file", 2, "absolute, clean"},
		"stage_in to another place":   {job + "#DW stage_in source=/lus/run/a destination=$DW_JOB_STRIPED/b type=file", 2, "must be $DW_JOB_STRIPED/a"},
		"stage_in of a list":          {job + "#DW stage_in source=/lus/run/l destination=$DW_JOB_STRIPED/l type=list", 2, "not supported"},
		"stage_out of a cache":        {job + "#DW stage_out source=$DW_JOB_STRIPED destination=/lus/out type=directory", 2, "needs a jobdw type=scratch"},
		"stage_out of part":           {"#DW jobdw type=scratch capacity=1TiB\n#DW stage_out source=$DW_JOB_STRIPED/a destination=/lus/out type=directory", 2, "whole instance"},
		"stage_out to a relative dir": {"#DW jobdw type=scratch capacity=1TiB\n#DW stage_out source=$DW_JOB_STRIPED destination=out type=directory", 2, "absolute, clean"},
		"a bad persistent name":       {"#DW persistentdw name=Big_Cache", 1, "not a valid instance name"},
		"persistentdw without a name": {"#DW persistentdw", 1, "missing option name"},
		"a good line then a bad one":  {job + "#DW persistentdw name=ok\nrm -rf /", 3, "not a #DW directive"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(tc.text)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Parse(%q) = %v, want a *LineError", tc.text, err)
			}
			if le.Line != tc.wantLine || !strings.Contains(le.Reason, tc.wantReason) {
				t.Errorf("got line %d reason %q, want line %d and a reason with %q", le.Line, le.Reason, tc.wantLine, tc.wantReason)
			}
		})
	}
}
