package policy

import (
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// testPool grants namespace "climate" /lus/global/projects/climate as uids
// 1000-1999 and gids 1000-1999, namespace "bio" /lus/global/projects/bio as
// uids 5000-5999, and namespaces labelled tier=gold /lus/global/gold.
func testPool() *cachev1alpha1.CachePool {
	threads, dirty, mult := int32(8), int32(80), int32(20)
	files := int64(1000)
	return &cachev1alpha1.CachePool{
		ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Spec: cachev1alpha1.CachePoolSpec{
			Media:                 cachev1alpha1.CacheMedia{HostPath: &cachev1alpha1.HostPathSource{Path: "/mnt/nvme"}, CapacityPerNode: resource.MustParse("100Gi")},
			AllocationGranularity: resource.MustParse("10Gi"),
			BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "lustre", MountPath: "/lus/global", HostPath: &cachev1alpha1.HostPathSource{Path: "/lus/global"},
				AccessRules: []cachev1alpha1.AccessRule{
					{Namespaces: []string{"climate"}, PathPrefixes: []cachev1alpha1.AbsolutePath{"/lus/global/projects/climate"},
						UIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}}},
					{Namespaces: []string{"bio"}, PathPrefixes: []cachev1alpha1.AbsolutePath{"/lus/global/projects/bio"},
						UIDRanges: []cachev1alpha1.IDRange{{Min: 5000, Max: 5999}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 5000, Max: 5999}}},
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
						PathPrefixes: []cachev1alpha1.AbsolutePath{"/lus/global/gold"}, AllowRoot: true,
						UIDRanges: []cachev1alpha1.IDRange{{Min: 0, Max: 100}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 0, Max: 100}}},
				},
			}},
			Ceilings: &cachev1alpha1.InstanceCeilings{
				Capacity: ptr(resource.MustParse("200Gi")), WriteBackThreads: &threads, DirtyHighWatermark: &dirty,
				MaxFileSize: ptr(resource.MustParse("1Ti")), MaxFiles: &files, WriteWindowMultiplier: &mult,
			},
		},
		Status: cachev1alpha1.CachePoolStatus{Nodes: []string{"n1", "n2", "n3"}, TotalCapacity: ptr(resource.MustParse("300Gi"))},
	}
}

// testInstance is an instance the test pool accepts.
func testInstance() *cachev1alpha1.CacheInstance {
	return &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "climate"},
		Spec: cachev1alpha1.CacheInstanceSpec{
			Type: cachev1alpha1.CacheTypeCache, Pool: "fast", Capacity: resource.MustParse("25Gi"),
			Backing: &cachev1alpha1.BackingPath{Filesystem: "lustre", Path: "/lus/global/projects/climate/run1"},
			RunAs:   cachev1alpha1.RunAs{UID: 1500, GID: 1500, SupplementalGroups: []int64{1600}},
		},
	}
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		edit       func(*cachev1alpha1.CacheInstance, *cachev1alpha1.CachePool)
		nsLabels   map[string]string
		noPool     bool
		wantReason string // "" means accepted
	}{
		"accepted":                       {},
		"accepted at the prefix itself":  {edit: setPath("/lus/global/projects/climate")},
		"accepted by namespace selector": {edit: inNamespace("gold-team", "/lus/global/gold/x", 0, 0), nsLabels: map[string]string{"tier": "gold"}},
		"pool missing":                   {noPool: true, wantReason: cachev1alpha1.ReasonPoolNotFound},
		"unknown file system": {edit: func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) { i.Spec.Backing.Filesystem = "gpfs" },
			wantReason: cachev1alpha1.ReasonFilesystemNotFound},
		"path traversal out of the prefix": {edit: setPath("/lus/global/projects/climate/../bio"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"path traversal to the root":       {edit: setPath("/lus/global/projects/climate/../../../../etc"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"unclean double slash":             {edit: setPath("/lus/global/projects/climate//x"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"relative path":                    {edit: setPath("lus/global/projects/climate"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"sibling that shares a prefix":     {edit: setPath("/lus/global/projects/climate2"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"parent of the prefix":             {edit: setPath("/lus/global/projects"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"outside the mount path":           {edit: setPath("/etc/shadow"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"foreign namespace's prefix":       {edit: setPath("/lus/global/projects/bio/data"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"selector does not match the namespace": {edit: inNamespace("gold-team", "/lus/global/gold/x", 10, 10),
			nsLabels: map[string]string{"tier": "silver"}, wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"uid outside the mapping":          {edit: setID(2000, 1500), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		"uid of a foreign namespace":       {edit: setID(5000, 1500), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		"gid outside the mapping":          {edit: setID(1500, 999), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		"root uid without allowRoot":       {edit: setID(0, 1500), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		"root gid without allowRoot":       {edit: setID(1500, 0), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		"supplemental group outside":       {edit: setGroups(1600, 4000), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		"supplemental root group":          {edit: setGroups(0), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		"capacity above the ceiling":       {edit: setCapacity("250Gi"), wantReason: cachev1alpha1.ReasonExceedsCeiling},
		"capacity beyond the pool's nodes": {edit: ceilingless(setCapacity("400Gi")), wantReason: cachev1alpha1.ReasonInsufficientCapacity},
		// Value() of these is no count of them: the rounding of 8Ei (which
		// parses as math.MaxInt64) wrapped around, and 1e30 is 0, so both
		// were once taken as one unit.
		"capacity of 8Ei":                        {edit: ceilingless(setCapacity("8Ei")), wantReason: cachev1alpha1.ReasonInsufficientCapacity},
		"capacity of the largest int64 of bytes": {edit: ceilingless(setCapacity("9223372036854775807")), wantReason: cachev1alpha1.ReasonInsufficientCapacity},
		"capacity of 1e30":                       {edit: ceilingless(setCapacity("1e30")), wantReason: cachev1alpha1.ReasonInsufficientCapacity},
		"capacity of 1e30 before the pool's capacity is counted": {edit: uncounted(ceilingless(setCapacity("1e30"))),
			wantReason: cachev1alpha1.ReasonInsufficientCapacity},
		// A node was cordoned or lost after the servers were placed.
		"placed on more nodes than the pool has now": {edit: placed(ceilingless(setCapacity("400Gi")))},
		// The ceiling was lowered after the servers were placed.
		"placed above a capacity ceiling lowered since": {edit: placed(setCapacity("250Gi"))},
		"threads above the ceiling":                     {edit: setWriteBack(9, 0), wantReason: cachev1alpha1.ReasonExceedsCeiling},
		"dirty watermark above the ceiling":             {edit: setWriteBack(0, 90), wantReason: cachev1alpha1.ReasonExceedsCeiling},
		"max file size above the ceiling":               {edit: setLimits("2Ti", 0, 0), wantReason: cachev1alpha1.ReasonExceedsCeiling},
		"max files above the ceiling":                   {edit: setLimits("", 1001, 0), wantReason: cachev1alpha1.ReasonExceedsCeiling},
		"write window above the ceiling":                {edit: setLimits("", 0, 21), wantReason: cachev1alpha1.ReasonExceedsCeiling},
		"stage-out to a foreign prefix":                 {edit: scratchTo("/lus/global/projects/bio"), wantReason: cachev1alpha1.ReasonPathNotAllowed},
		"scratch as an unmapped uid":                    {edit: scratchAs(9999), wantReason: cachev1alpha1.ReasonIdentityNotAllowed},
		// Its servers would not share one namespace.
		"scratch": {edit: scratchAs(1500), wantReason: cachev1alpha1.ReasonNotSupported},
		"pool with storage class media": {edit: func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
			p.Spec.Media.HostPath, p.Spec.Media.StorageClass = nil, &cachev1alpha1.StorageClassMedia{Name: "local"}
		}},
		"claim of the instance's namespace": {edit: pvcIn("climate")},
		// Its servers would mount a claim of that name in the instance's
		// own namespace, whichever way the rule grants the path.
		"claim of another namespace": {edit: pvcIn("shared"), wantReason: cachev1alpha1.ReasonMediaUnavailable},
		"claim of another namespace by selector": {edit: func(i *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
			pvcIn("shared")(i, p)
			inNamespace("gold-team", "/lus/global/gold/x", 10, 10)(i, p)
		}, nsLabels: map[string]string{"tier": "gold"}, wantReason: cachev1alpha1.ReasonMediaUnavailable},
		// Extent sizes the servers would not start with, in a pool stored
		// before the schema refused them.
		"pool with an extent below 4Ki":               {edit: setExtent("1Ki", ""), wantReason: cachev1alpha1.ReasonMediaUnavailable},
		"pool with an extent above 1Gi":               {edit: setExtent("2Gi", ""), wantReason: cachev1alpha1.ReasonMediaUnavailable},
		"pool with an extent of the granularity":      {edit: setExtent("10Gi", ""), wantReason: cachev1alpha1.ReasonMediaUnavailable},
		"pool with the default extent and 1Mi units":  {edit: setExtent("", "1Mi"), wantReason: cachev1alpha1.ReasonMediaUnavailable},
		"pool with an extent of half the granularity": {edit: setExtent("1Mi", "2Mi")},
		// Value() of it is 0, which made a total capacity of 0.
		"pool of 1e30 per node": {edit: func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
			p.Spec.Media.CapacityPerNode = resource.MustParse("1e30")
		}, wantReason: cachev1alpha1.ReasonMediaUnavailable},
		"storage class pool with granularity above capacityPerNode": {edit: func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
			p.Spec.Media.HostPath, p.Spec.Media.StorageClass = nil, &cachev1alpha1.StorageClassMedia{Name: "local"}
			p.Spec.AllocationGranularity = resource.MustParse("200Gi")
		}, wantReason: cachev1alpha1.ReasonMediaUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			inst, pool := testInstance(), testPool()
			if tc.edit != nil {
				tc.edit(inst, pool)
			}
			if tc.noPool {
				pool = nil
			}
			vs := Validate(inst, pool, tc.nsLabels)
			if tc.wantReason == "" {
				if vs != nil {
					t.Fatalf("Validate refused an acceptable instance: %v", vs.Err())
				}
				return
			}
			if len(vs) == 0 {
				t.Fatalf("Validate accepted the instance, want a %s refusal", tc.wantReason)
			}
			if diff := cmp.Diff(tc.wantReason, vs[0].Reason); diff != "" {
				t.Errorf("reason (-want +got):\n%s\nviolations: %v", diff, vs.Err())
			}
			if vs[0].Message == "" || vs[0].Field == "" {
				t.Errorf("violation does not name its field and rule: %+v", vs[0])
			}
		})
	}
}

type edit = func(*cachev1alpha1.CacheInstance, *cachev1alpha1.CachePool)

func setPath(p string) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		i.Spec.Backing.Path = cachev1alpha1.AbsolutePath(p)
	}
}

func inNamespace(ns, p string, uid, gid int64) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		i.Namespace, i.Spec.Backing.Path = ns, cachev1alpha1.AbsolutePath(p)
		i.Spec.RunAs = cachev1alpha1.RunAs{UID: uid, GID: gid}
	}
}

func setID(uid, gid int64) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		i.Spec.RunAs.UID, i.Spec.RunAs.GID = uid, gid
	}
}

func setGroups(gs ...int64) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) { i.Spec.RunAs.SupplementalGroups = gs }
}

func setCapacity(q string) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		i.Spec.Capacity = resource.MustParse(q)
	}
}

// placed gives the instance the servers the reconciler placed.
func placed(e edit) edit {
	return func(i *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
		e(i, p)
		i.Status.Servers = []cachev1alpha1.ServerStatus{{Name: "server-0", Node: "n1", Capacity: ptr(resource.MustParse("400Gi"))}}
	}
}

func ceilingless(e edit) edit {
	return func(i *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
		e(i, p)
		p.Spec.Ceilings.Capacity = nil
	}
}

// setExtent sets the pool's extent size (unset: the default) and, unless
// empty, its allocation granularity.
func setExtent(es, granularity string) edit {
	return func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
		p.Spec.ExtentSize = nil
		if es != "" {
			p.Spec.ExtentSize = ptr(resource.MustParse(es))
		}
		if granularity != "" {
			p.Spec.AllocationGranularity = resource.MustParse(granularity)
		}
	}
}

// uncounted takes the pool's total capacity away, as before its first
// reconcile.
func uncounted(e edit) edit {
	return func(i *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
		e(i, p)
		p.Status.TotalCapacity = nil
	}
}

func setWriteBack(threads, high int32) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		i.Spec.WriteBack = &cachev1alpha1.WriteBack{}
		if threads > 0 {
			i.Spec.WriteBack.Threads = &threads
		}
		if high > 0 {
			low := high - 10
			i.Spec.WriteBack.DirtyHighWatermark, i.Spec.WriteBack.DirtyLowWatermark = &high, &low
		}
	}
}

func setLimits(mfs string, files int64, mult int32) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		l := &cachev1alpha1.Limits{}
		if mfs != "" {
			l.MaxFileSize = ptr(resource.MustParse(mfs))
		}
		if files > 0 {
			l.MaxFiles = &files
		}
		if mult > 0 {
			l.WriteWindow = &cachev1alpha1.WriteWindow{Multiplier: &mult}
		}
		i.Spec.Limits = l
	}
}

// pvcIn makes the pool's file system a claim of namespace ns, keeping the
// rules that list no other namespace, as the pool's own check demands.
func pvcIn(ns string) edit {
	return func(_ *cachev1alpha1.CacheInstance, p *cachev1alpha1.CachePool) {
		fs := &p.Spec.BackingFilesystems[0]
		fs.HostPath, fs.PVC = nil, &cachev1alpha1.PVCSource{ClaimName: "pfs", Namespace: ns}
		fs.AccessRules = slices.DeleteFunc(fs.AccessRules, func(r cachev1alpha1.AccessRule) bool {
			return slices.ContainsFunc(r.Namespaces, func(n string) bool { return n != ns })
		})
	}
}

func scratchTo(p string) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		i.Spec.Type, i.Spec.Backing = cachev1alpha1.CacheTypeScratch, nil
		i.Spec.StageOut = &cachev1alpha1.StageOut{Destination: cachev1alpha1.BackingPath{Filesystem: "lustre", Path: cachev1alpha1.AbsolutePath(p)}}
	}
}

func scratchAs(uid int64) edit {
	return func(i *cachev1alpha1.CacheInstance, _ *cachev1alpha1.CachePool) {
		i.Spec.Type, i.Spec.Backing = cachev1alpha1.CacheTypeScratch, nil
		i.Spec.RunAs.UID = uid
	}
}

func TestAllocate(t *testing.T) {
	for name, tc := range map[string]struct {
		capacity string
		nodes    int
		want     Allocation
	}{
		"rounds up to one unit":         {capacity: "1Gi", nodes: 3, want: Allocation{Units: 1, Servers: 1, PerServer: 10 << 30}},
		"one server per unit":           {capacity: "25Gi", nodes: 3, want: Allocation{Units: 3, Servers: 3, PerServer: 10 << 30}},
		"capped at the nodes":           {capacity: "50Gi", nodes: 2, want: Allocation{Units: 5, Servers: 2, PerServer: 30 << 30}},
		"no nodes still one server":     {capacity: "10Gi", nodes: 0, want: Allocation{Units: 1, Servers: 1, PerServer: 10 << 30}},
		"exact multiple is not rounded": {capacity: "20Gi", nodes: 5, want: Allocation{Units: 2, Servers: 2, PerServer: 10 << 30}},
		// Rounding up by (capacity+granularity-1)/granularity wrapped around
		// to one unit here.
		"the largest int64 of bytes": {capacity: "9223372036854775807", nodes: 3,
			want: Allocation{Units: 858993460, Servers: 3, PerServer: 286331154 * 10 << 30}},
		"the largest int64 of bytes on one node saturates": {capacity: "9223372036854775807", nodes: 1,
			want: Allocation{Units: 858993460, Servers: 1, PerServer: math.MaxInt64}},
		"more than int64 bytes counts as the most": {capacity: "1e30", nodes: 1,
			want: Allocation{Units: 858993460, Servers: 1, PerServer: math.MaxInt64}},
	} {
		t.Run(name, func(t *testing.T) {
			inst := testInstance()
			inst.Spec.Capacity = resource.MustParse(tc.capacity)
			got := Allocate(inst, testPool(), tc.nodes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Allocate (-want +got):\n%s", diff)
			}
			if c := countBytes(inst.Spec.Capacity); got.Total() < c {
				t.Errorf("Total() = %d, less than the %d bytes asked for", got.Total(), c)
			}
		})
	}
}

func TestTotalCapacity(t *testing.T) {
	for name, tc := range map[string]struct {
		perNode string
		nodes   int
		want    int64
	}{
		"per node times nodes":    {perNode: "100Gi", nodes: 3, want: 300 << 30},
		"no nodes":                {perNode: "100Gi", nodes: 0, want: 0},
		"4Ei on 3 nodes":          {perNode: "4Ei", nodes: 3, want: math.MaxInt64},
		"1e30 counts as the most": {perNode: "1e30", nodes: 1, want: math.MaxInt64},
	} {
		t.Run(name, func(t *testing.T) {
			pool := testPool()
			pool.Spec.Media.CapacityPerNode = resource.MustParse(tc.perNode)
			if got := TotalCapacity(pool, tc.nodes); got != tc.want {
				t.Errorf("TotalCapacity() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSoleIdentity(t *testing.T) {
	rule := func(uidMin, uidMax, gid int64, ns string) cachev1alpha1.AccessRule {
		return cachev1alpha1.AccessRule{
			Namespaces: []string{ns}, PathPrefixes: []cachev1alpha1.AbsolutePath{"/lus/p"},
			UIDRanges: []cachev1alpha1.IDRange{{Min: uidMin, Max: uidMax}}, GIDRanges: []cachev1alpha1.IDRange{{Min: gid, Max: gid}},
		}
	}
	tests := map[string]struct {
		rules  []cachev1alpha1.AccessRule
		want   cachev1alpha1.RunAs
		wantOK bool
	}{
		"one identity":             {rules: []cachev1alpha1.AccessRule{rule(1000, 1000, 100, "a")}, want: cachev1alpha1.RunAs{UID: 1000, GID: 100}, wantOK: true},
		"same identity twice":      {rules: []cachev1alpha1.AccessRule{rule(1000, 1000, 100, "a"), rule(1000, 1000, 100, "a")}, want: cachev1alpha1.RunAs{UID: 1000, GID: 100}, wantOK: true},
		"a range":                  {rules: []cachev1alpha1.AccessRule{rule(1000, 1999, 100, "a")}},
		"two identities":           {rules: []cachev1alpha1.AccessRule{rule(1000, 1000, 100, "a"), rule(1001, 1001, 100, "a")}},
		"another namespace's only": {rules: []cachev1alpha1.AccessRule{rule(1000, 1000, 100, "b")}},
		"root without allowRoot":   {rules: []cachev1alpha1.AccessRule{rule(0, 0, 0, "a")}},
		"other namespace ignored":  {rules: []cachev1alpha1.AccessRule{rule(1000, 1000, 100, "a"), rule(2000, 2999, 100, "b")}, want: cachev1alpha1.RunAs{UID: 1000, GID: 100}, wantOK: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pool := &cachev1alpha1.CachePool{Spec: cachev1alpha1.CachePoolSpec{BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "pfs", MountPath: "/lus", AccessRules: tc.rules,
			}}}}
			inst := &cachev1alpha1.CacheInstance{}
			inst.Namespace = "a"
			inst.Spec.Backing = &cachev1alpha1.BackingPath{Filesystem: "pfs", Path: "/lus/p/run"}
			got, ok := SoleIdentity(inst, pool, nil)
			if ok != tc.wantOK || got.UID != tc.want.UID || got.GID != tc.want.GID {
				t.Errorf("SoleIdentity() = %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
