//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/test/e2e/pattern"
)

// The job's identity, which the pool maps to the test namespace.
const (
	jobUID = 1000
	jobGID = 1000
)

// workloadImage is test/e2e/workload, packed and loaded by hack/e2e.sh.
var workloadImage = envOr("E2E_WORKLOAD_IMAGE", "burstcache-e2e-workload:dev")

// pfsRoot is the host directory the pools name as their backing file system.
// The suite reads it directly to check what reached the PFS, so it must run
// on the (single) node, as it does on the local cluster.
var pfsRoot = envOr("E2E_PFS", "/srv/pfs")

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// world is a namespace of its own, a CachePool that lets it cache
// pfsRoot/e2e/<namespace> as jobUID:jobGID (changed by edits), and a
// StorageClass of that pool.
type world struct {
	ns, pool, class string
	// pfs is the host directory of the namespace on the PFS, owned by jobUID.
	pfs string
}

func newWorld(prefix string, edits ...func(*cachev1alpha1.CachePool)) *world {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + prefix + "-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	w := &world{ns: ns.Name, pool: ns.Name, class: ns.Name, pfs: filepath.Join(pfsRoot, "e2e", ns.Name)}
	Expect(os.MkdirAll(w.pfs, 0o755)).To(Succeed())
	Expect(os.Chown(w.pfs, jobUID, jobGID)).To(Succeed())
	pool := w.poolObject()
	for _, edit := range edits {
		edit(pool)
	}
	Expect(k8sClient.Create(ctx, pool)).To(Succeed())
	Expect(k8sClient.Create(ctx, w.classObject())).To(Succeed())
	DeferCleanup(w.cleanup)
	return w
}

func (w *world) poolObject() *cachev1alpha1.CachePool {
	return &cachev1alpha1.CachePool{
		ObjectMeta: metav1.ObjectMeta{Name: w.pool},
		Spec: cachev1alpha1.CachePoolSpec{
			Media: cachev1alpha1.CacheMedia{
				HostPath:        &cachev1alpha1.HostPathSource{Path: "/var/lib/burstcache-e2e/cache"},
				CapacityPerNode: resource.MustParse("2Gi"),
			},
			AllocationGranularity: resource.MustParse("1Gi"),
			BackingFilesystems: []cachev1alpha1.BackingFilesystem{{
				Name: "pfs", MountPath: cachev1alpha1.AbsolutePath(pfsRoot), HostPath: &cachev1alpha1.HostPathSource{Path: cachev1alpha1.AbsolutePath(pfsRoot)},
				AccessRules: []cachev1alpha1.AccessRule{{
					Namespaces:   []string{w.ns},
					PathPrefixes: []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.pfs)},
					UIDRanges:    []cachev1alpha1.IDRange{{Min: jobUID, Max: jobUID}},
					GIDRanges:    []cachev1alpha1.IDRange{{Min: jobGID, Max: jobGID}},
				}},
			}},
		},
	}
}

func (w *world) classObject() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: w.class},
		Provisioner:       "csi.burstcache.io",
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		Parameters:        map[string]string{"pool": w.pool},
	}
}

// cleanup deletes the namespace's jobs, pods and instances, waits until the
// instances are gone (the namespace's deletion would take their servers
// before write-back), then the namespace, the pool and the class. A test
// that failed leaves the PFS directory for inspection.
func (w *world) cleanup() {
	bg := client.PropagationPolicy(metav1.DeletePropagationBackground)
	Expect(k8sClient.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(w.ns), bg)).To(Succeed())
	Expect(k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(w.ns), client.MatchingLabels{"e2e": "workload"})).To(Succeed())
	Expect(k8sClient.DeleteAllOf(ctx, &cachev1alpha1.CacheInstance{}, client.InNamespace(w.ns))).To(Succeed())
	Eventually(w.instances).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(BeEmpty())
	Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})).To(Succeed())
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, w.classObject()))).To(Succeed())
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, w.poolObject()))).To(Succeed())
}

// instances returns the names of the CacheInstances left in the namespace.
func (w *world) instances(g Gomega) []string {
	list := &cachev1alpha1.CacheInstanceList{}
	g.Expect(k8sClient.List(ctx, list, client.InNamespace(w.ns))).To(Succeed())
	names := []string{}
	for _, i := range list.Items {
		names = append(names, fmt.Sprintf("%s (%s)", i.Name, i.Status.Phase))
	}
	return names
}

// mkdirPFS makes dir below the namespace's PFS directory, owned by the job.
func (w *world) mkdirPFS(dir string) string {
	GinkgoHelper()
	p := filepath.Join(w.pfs, dir)
	Expect(os.MkdirAll(p, 0o755)).To(Succeed())
	Expect(os.Chown(p, jobUID, jobGID)).To(Succeed())
	return p
}

// expectPattern checks on the host that dir holds count workload files of
// size bytes, byte for byte, owned by the job's uid.
func expectPattern(dir string, count, size int) {
	GinkgoHelper()
	for i := range count {
		p := filepath.Join(dir, pattern.Name(i))
		got, err := os.ReadFile(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(got)).To(Equal(size), p)
		Expect(bytes.Equal(got, pattern.Bytes(pattern.Name(i), size))).To(BeTrue(), "%s differs from what the job wrote", p)
		st, err := os.Stat(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Sys().(*syscall.Stat_t).Uid).To(BeEquivalentTo(jobUID), "%s is not owned by the job's uid", p)
	}
}

// cacheAnnotations are the claim annotations of a cache of path as the job's uid.
func cacheAnnotations(path string, extra ...string) map[string]string {
	a := map[string]string{
		"csi.burstcache.io/backingFilesystem": "pfs",
		"csi.burstcache.io/backingPath":       path,
		"csi.burstcache.io/runAsUID":          fmt.Sprint(jobUID),
		"csi.burstcache.io/runAsGID":          fmt.Sprint(jobGID),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		a["csi.burstcache.io/"+extra[i]] = extra[i+1]
	}
	return a
}

// workloadContainer runs the workload with args, as the job's uid, with the
// cache mounted at /cache.
func workloadContainer(args ...string) corev1.Container {
	return corev1.Container{
		Name: "workload", Image: workloadImage, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"/workload"}, Args: args,
		VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: ptr.To(int64(jobUID)), RunAsGroup: ptr.To(int64(jobGID)), RunAsNonRoot: ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// podLogs returns the logs of a pod's workload container, for failure messages.
func podLogs(ns, name string) string {
	out, err := clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "workload"}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(out))
}
