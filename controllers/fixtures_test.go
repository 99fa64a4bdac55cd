package controllers_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// runAsUID and runAsGID are the identity the test pools map to each test
// namespace (uids and gids 1000-1999), and the one the instances use.
const (
	runAsUID = 1500
	runAsGID = 1500
	mountAt  = "/lus/global"
)

// world is one test's namespace, pool and backing directory.
type world struct {
	ns      string
	pool    *cachev1alpha1.CachePool
	pfs     string // the host directory behind mountAt
	backing string // the namespace's project directory, as jobs see it
}

// newWorld makes a namespace, a pool of the three nodes with 256Mi each in
// 64Mi units that grants the namespace mountAt/projects/<ns>, and that
// project directory owned by runAs. edits change the pool before it is
// created. It waits until the pool saw its nodes.
func newWorld(edits ...func(*cachev1alpha1.CachePool)) *world {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctl-", Labels: map[string]string{"team": "climate"}}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	w := &world{ns: ns.Name, pfs: filepath.Join(kl.Root, "pfs-"+ns.Name)}
	w.backing = mountAt + "/projects/" + ns.Name
	dir := w.hostPath(w.backing)
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.Chown(dir, runAsUID, runAsGID)).To(Succeed())
	w.pool = &cachev1alpha1.CachePool{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pool-"},
		Spec: cachev1alpha1.CachePoolSpec{
			Nodes: &cachev1alpha1.NodePlacement{NodeSelector: map[string]string{"node.burstcache.io/nvme": "true"}},
			Media: cachev1alpha1.CacheMedia{
				HostPath:        &cachev1alpha1.HostPathSource{Path: cachev1alpha1.AbsolutePath(filepath.Join(kl.Root, "nvme"))},
				CapacityPerNode: resource.MustParse("256Mi"),
			},
			AllocationGranularity: resource.MustParse("64Mi"),
			BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "pfs", MountPath: mountAt,
				HostPath: &cachev1alpha1.HostPathSource{Path: cachev1alpha1.AbsolutePath(w.pfs)},
				AccessRules: []cachev1alpha1.AccessRule{{
					Namespaces:   []string{ns.Name},
					PathPrefixes: []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing)},
					UIDRanges:    []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}},
					GIDRanges:    []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}},
				}},
			}},
			Defaults: &cachev1alpha1.InstanceDefaults{
				WriteBack: &cachev1alpha1.WriteBackDefaults{Threads: 2, DirtyHighWatermark: 90, DirtyLowWatermark: 80},
			},
			Ceilings: &cachev1alpha1.InstanceCeilings{Capacity: ptr(resource.MustParse("512Mi")), WriteBackThreads: ptr(int32(8))},
		},
	}
	for _, edit := range edits {
		edit(w.pool)
	}
	Expect(k8sClient.Create(ctx, w.pool)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), w.pool)).To(Succeed())
		g.Expect(w.pool.Status.Nodes).To(HaveLen(3), "%+v", w.pool.Status)
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	return w
}

// hostPath is where a path under mountAt lives on this machine.
func (w *world) hostPath(p string) string {
	rel, err := filepath.Rel(mountAt, p)
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(w.pfs, rel)
}

// instance returns an instance the pool accepts, not created yet.
func (w *world) instance(capacity string) *cachev1alpha1.CacheInstance {
	return &cachev1alpha1.CacheInstance{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "run-", Namespace: w.ns},
		Spec: cachev1alpha1.CacheInstanceSpec{
			Pool: w.pool.Name, Capacity: resource.MustParse(capacity),
			Backing: &cachev1alpha1.BackingPath{Filesystem: "pfs", Path: cachev1alpha1.AbsolutePath(w.backing)},
			RunAs:   cachev1alpha1.RunAs{UID: runAsUID, GID: runAsGID, SupplementalGroups: []int64{1600}},
		},
	}
}

// get reads the instance again; it fails the test if it is gone.
func get(inst *cachev1alpha1.CacheInstance) func(Gomega) *cachev1alpha1.CacheInstance {
	return func(g Gomega) *cachev1alpha1.CacheInstance {
		cur := &cachev1alpha1.CacheInstance{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), cur)).To(Succeed())
		return cur
	}
}

func phaseOf(inst *cachev1alpha1.CacheInstance) func(Gomega) cachev1alpha1.Phase {
	return func(g Gomega) cachev1alpha1.Phase { return get(inst)(g).Status.Phase }
}

func gone(o client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)))
	}
}

// eventReasons returns the reasons of the Events about the named object.
func eventReasons(ns, name string) []string {
	var list eventsv1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// serverPods lists the instance's server pods.
func serverPods(inst *cachev1alpha1.CacheInstance) []corev1.Pod {
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(inst.Namespace), client.MatchingLabels{
		cachev1alpha1.LabelInstance: inst.Name, cachev1alpha1.LabelComponent: cachev1alpha1.ComponentServer,
	})).To(Succeed())
	return pods.Items
}
