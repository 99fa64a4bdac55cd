package controllers_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/cacheinstance"
)

var _ = Describe("Provisioning", func() {
	It("places one server per unit on distinct nodes, runs them as runAs, and goes Ready from real servers", func() {
		w := newWorld()
		inst := w.instance("150Mi") // three 64Mi units
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())

		By("placing three servers on three nodes")
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Finalizers).To(ContainElement(cachev1alpha1.Finalizer))
			g.Expect(cur.Status.Servers).To(HaveLen(3))
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseProvisioning))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		pods := serverPods(inst)
		Expect(pods).To(HaveLen(3))
		nodes := map[string]bool{}
		for i := range pods {
			expectServerPod(w, inst, &pods[i])
			nodes[pods[i].Spec.NodeSelector[corev1.LabelHostname]] = true
		}
		Expect(nodes).To(HaveLen(3), "servers share a node")

		By("serving them through a headless Service, protected from evictions")
		svc := &corev1.Service{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: cacheinstance.ServiceName(inst)}, svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.Spec.Selector).To(HaveKeyWithValue(cachev1alpha1.LabelInstance, inst.Name))
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: cacheinstance.ServiceName(inst)}, pdb)).To(Succeed())
		Expect(pdb.Spec.MaxUnavailable).To(BeNil())
		Expect(pdb.Spec.MinAvailable).To(HaveValue(Equal(intstr.FromInt32(3))), "every server must stay available")

		By("taking the capacity from the pool")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), w.pool)).To(Succeed())
			g.Expect(w.pool.Status.Instances).To(BeEquivalentTo(1))
			g.Expect(w.pool.Status.TotalCapacity.Value()).To(BeEquivalentTo(3 * 256 << 20))
			g.Expect(w.pool.Status.FreeCapacity.Value()).To(BeEquivalentTo(3*256<<20 - 3*64<<20))
			g.Expect(meta.IsStatusConditionTrue(w.pool.Status.Conditions, cachev1alpha1.ConditionPoolReady)).To(BeTrue())
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

		By("turning Ready once the real servers run, with usage summed from them")
		addrs := kl.RunServers(ctx, inst, 3)
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
			g.Expect(cur.Status.ReadyServers).To(BeEquivalentTo(3))
			g.Expect(cur.Status.Usage).NotTo(BeNil())
			g.Expect(cur.Status.Usage.Capacity.Value()).To(BeEquivalentTo(3 * 64 << 20))
			g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
			for i, s := range cur.Status.Servers {
				g.Expect(s.Endpoint).To(Equal(addrs[i]), "the endpoint is not where the server's pod serves")
				g.Expect(s.Endpoint).To(HaveSuffix(":7070"))
			}
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonAsExpected))
	})

	It("runs the servers of a root instance as each caller, only as the ids the pool maps", func() {
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			r := &p.Spec.BackingFilesystems[0].AccessRules[0]
			r.AllowRoot = true
			r.UIDRanges = []cachev1alpha1.IDRange{{Min: 0, Max: 0}, {Min: 1000, Max: 1999}}
			r.GIDRanges = []cachev1alpha1.IDRange{{Min: 0, Max: 0}, {Min: 1000, Max: 2999}}
		})
		inst := w.instance("64Mi")
		inst.Spec.RunAs = cachev1alpha1.RunAs{UID: 0, GID: 0}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		var pods []corev1.Pod
		Eventually(func() []corev1.Pod { pods = serverPods(inst); return pods }, 20*time.Second, 100*time.Millisecond).Should(HaveLen(1))
		c := pods[0].Spec.Containers[0]
		Expect(c.Args).To(ContainElements("--act-as-caller", "--caller-uids=0-0,1000-1999", "--caller-gids=0-0,1000-2999"))
		Expect(c.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
		Expect(c.SecurityContext.Capabilities.Add).To(ContainElements(corev1.Capability("SETUID"), corev1.Capability("SETGID"), corev1.Capability("DAC_READ_SEARCH")))
		Expect(c.SecurityContext.Capabilities.Add).NotTo(ContainElement(corev1.Capability("SYS_ADMIN")))

		By("admitting only mounts that sign with the mount key the manager made, not whoever reads the instance's Secret")
		key := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, suiteMountKey, key)).To(Succeed())
		pub, err := control.MountPublicKey(string(key.Data[cachev1alpha1.MountKeySecretKey]))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Args).To(ContainElement("--mount-public-key=" + pub))

		By("starting real servers with those arguments")
		kl.RunServers(ctx, inst, 1)
		Eventually(func(g Gomega) {
			g.Expect(get(inst)(g).Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())

		By("leaving the servers of other instances with no capability")
		other := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		Eventually(func() []corev1.Pod { pods = serverPods(other); return pods }, 20*time.Second, 100*time.Millisecond).Should(HaveLen(1))
		c = pods[0].Spec.Containers[0]
		Expect(c.Args).NotTo(ContainElement("--act-as-caller"))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--mount-public-key")))
		Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty())
	})

	It("fills the pool's defaults and pushes knob changes to running servers without a restart", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Expect(inst.Spec.WriteBack.Threads).To(HaveValue(BeEquivalentTo(2)), "the defaulting webhook did not fill the pool's default")
		Expect(inst.Spec.WriteBack.DirtyHighWatermark).To(HaveValue(BeEquivalentTo(90)))
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		serverDone := kl.Done(w.ns + "/" + inst.Name + "-server-0")

		By("writing 4Mi that stay dirty under a 90% watermark")
		data := bytes.Repeat([]byte("burstcache"), 400<<10)
		writeThroughMount(inst, addrs, "out/a.dat", data)
		Eventually(func(g Gomega) int64 {
			return get(inst)(g).Status.Usage.Dirty.Value()
		}, 20*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", len(data)))

		By("lowering the watermarks: the running server starts writing back")
		Eventually(func() error {
			cur := get(inst)(Default)
			cur.Spec.WriteBack.DirtyHighWatermark, cur.Spec.WriteBack.DirtyLowWatermark = ptr(int32(2)), ptr(int32(1))
			return k8sClient.Update(ctx, cur)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			u := get(inst)(g).Status.Usage
			g.Expect(u.WriteBackBytes).To(BeNumerically(">", 0))
			g.Expect(u.Dirty.Value()).To(BeNumerically("<", len(data)))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(serverDone).NotTo(BeClosed(), "the server was restarted")
	})

	It("copies spec.preload up from the backing file system before turning Ready", func() {
		w := newWorld()
		data := bytes.Repeat([]byte("preload!"), 256<<10) // 2Mi
		dir := filepath.Join(w.hostPath(w.backing), "input")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "set.bin"), data, 0o644)).To(Succeed())
		Expect(os.Chown(dir, runAsUID, runAsGID)).To(Succeed())
		inst := w.instance("64Mi")
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{cachev1alpha1.AbsolutePath(w.backing + "/input")}
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
			g.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, cachev1alpha1.ConditionPreloaded)).To(BeTrue())
			g.Expect(cur.Status.Usage.CopyUpBytes).To(BeNumerically(">=", len(data)))
			g.Expect(cur.Status.Usage.Cached.Value()).To(BeNumerically(">=", len(data)))
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	It("refuses an instance beyond the pool's free capacity, and accepts it once capacity is freed", func() {
		w := newWorld()
		big := w.instance("500Mi") // 8 units over 3 nodes: 192Mi of each node's 256Mi
		Expect(k8sClient.Create(ctx, big)).To(Succeed())
		kl.RunServers(ctx, big, 3)
		Eventually(phaseOf(big), 20*time.Second, 100*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		Eventually(func(g Gomega) int64 {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), w.pool)).To(Succeed())
			return w.pool.Status.FreeCapacity.Value()
		}, 10*time.Second, 100*time.Millisecond).Should(BeEquivalentTo(3 * 64 << 20))

		second := w.instance("200Mi") // 4 units: 384Mi, more than is free
		err := k8sClient.Create(ctx, second)
		Expect(err).To(MatchError(ContainSubstring(cachev1alpha1.ReasonInsufficientCapacity)))

		By("deleting the first instance, which holds no dirty data, frees its capacity")
		Expect(k8sClient.Delete(ctx, big)).To(Succeed())
		Eventually(gone(big), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Eventually(func() error {
			second = w.instance("200Mi")
			return k8sClient.Create(ctx, second)
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) []cachev1alpha1.ServerStatus {
			return get(second)(g).Status.Servers
		}, 20*time.Second, 200*time.Millisecond).Should(HaveLen(3))
	})

	It("places instances created at once on nodes with room for them, and lets the rest wait", func() {
		// One 64Mi unit per node: room for three instances of 64Mi.
		w := newWorld(func(p *cachev1alpha1.CachePool) {
			p.Spec.Media.CapacityPerNode = resource.MustParse("64Mi")
		})
		var insts []*cachev1alpha1.CacheInstance
		for i := range 4 {
			inst := w.instance("64Mi")
			// The webhook checks the pool's free capacity as its status
			// says, which usually lags behind placements, so that all four
			// are admitted; a status that caught up refuses the last.
			err := k8sClient.Create(ctx, inst)
			if i == 3 && err != nil {
				Expect(err).To(MatchError(ContainSubstring(cachev1alpha1.ReasonInsufficientCapacity)))
				continue
			}
			Expect(err).NotTo(HaveOccurred())
			insts = append(insts, inst)
		}
		placed := func(g Gomega) map[string]int {
			perNode := map[string]int{}
			for _, inst := range insts {
				for _, srv := range get(inst)(g).Status.Servers {
					perNode[srv.Node]++
				}
			}
			return perNode
		}
		Eventually(placed, 20*time.Second, 200*time.Millisecond).Should(HaveLen(3))
		Consistently(placed, 3*time.Second, 200*time.Millisecond).Should(SatisfyAll(
			HaveKeyWithValue("node-a", 1), HaveKeyWithValue("node-b", 1), HaveKeyWithValue("node-c", 1)))
		waiting := 0
		for _, inst := range insts {
			cur := get(inst)(Default)
			if len(cur.Status.Servers) == 0 {
				waiting++
				Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhasePending))
				Expect(meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionReady)).
					To(HaveField("Reason", cachev1alpha1.ReasonInsufficientCapacity))
			}
		}
		Expect(waiting).To(Equal(len(insts) - 3))
	})
})

// expectServerPod checks the pod spec of one server.
func expectServerPod(w *world, inst *cachev1alpha1.CacheInstance, pod *corev1.Pod) {
	GinkgoHelper()
	Expect(pod.Finalizers).To(ContainElement(cachev1alpha1.ServerProtectionFinalizer))
	Expect(pod.OwnerReferences).To(BeEmpty(), "the garbage collector must not reach server pods")
	sc := pod.Spec.SecurityContext
	Expect(sc.RunAsUser).To(HaveValue(BeEquivalentTo(runAsUID)))
	Expect(sc.RunAsGroup).To(HaveValue(BeEquivalentTo(runAsGID)))
	Expect(sc.SupplementalGroups).To(Equal([]int64{1600}))
	c := pod.Spec.Containers[0]
	Expect(c.Args).To(ContainElements("--servers=3", "--capacity=67108864", "--backing="+w.backing,
		"--uid=1500", "--gid=1500", "--groups=1600", "--writeback-threads=2", "--dirty-high=90"))
	Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	Expect(c.ReadinessProbe.HTTPGet.Port.StrVal).To(Equal("control"))
	// The liveness probe must not restart a server that is recovering a
	// large index: the startup probe holds it off, for minutes.
	Expect(c.StartupProbe).NotTo(BeNil())
	Expect(c.StartupProbe.HTTPGet.Path).To(Equal("/healthz"))
	Expect(c.StartupProbe.PeriodSeconds * c.StartupProbe.FailureThreshold).To(BeNumerically(">=", 600))
	Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceCPU))
	Expect(c.Resources.Requests.Memory().Cmp(resource.MustParse("1Mi"))).To(BeNumerically(">", 0))
	Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", mountAt)))
	var hostPaths []string
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	Expect(hostPaths).To(ContainElements(w.pfs, cacheinstance.CacheHostDir(inst, w.pool, indexOf(pod))))
}

func indexOf(pod *corev1.Pod) int {
	GinkgoHelper()
	i, err := strconv.Atoi(pod.Labels[cachev1alpha1.LabelServerIndex])
	Expect(err).NotTo(HaveOccurred())
	return i
}
