package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Admission", func() {
	var w *world
	BeforeEach(func() { w = newWorld() })

	type refusal struct {
		edit   func(w *world, i *cachev1alpha1.CacheInstance)
		reason string
	}
	path := func(p string) func(*world, *cachev1alpha1.CacheInstance) {
		return func(_ *world, i *cachev1alpha1.CacheInstance) { i.Spec.Backing.Path = cachev1alpha1.AbsolutePath(p) }
	}
	sub := func(rel string) func(*world, *cachev1alpha1.CacheInstance) {
		return func(w *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Backing.Path = cachev1alpha1.AbsolutePath(w.backing + rel)
		}
	}
	id := func(uid, gid int64, groups ...int64) func(*world, *cachev1alpha1.CacheInstance) {
		return func(_ *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.RunAs = cachev1alpha1.RunAs{UID: uid, GID: gid, SupplementalGroups: groups}
		}
	}
	// beyondCount asks for a capacity whose Value() is no count of it, in a
	// pool without a capacity ceiling to refuse it first.
	beyondCount := func(q string) func(*world, *cachev1alpha1.CacheInstance) {
		return func(w *world, i *cachev1alpha1.CacheInstance) {
			setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) { c.Capacity = nil })
			i.Spec.Capacity = resource.MustParse(q)
		}
	}
	DescribeTable("the validating webhook refuses, naming the rule",
		func(r refusal) {
			inst := w.instance("64Mi")
			r.edit(w, inst)
			err := k8sClient.Create(ctx, inst)
			Expect(err).To(HaveOccurred(), "the API server accepted %+v", inst.Spec)
			Expect(err.Error()).To(ContainSubstring(r.reason))
		},
		Entry("a pool that does not exist", refusal{func(_ *world, i *cachev1alpha1.CacheInstance) { i.Spec.Pool = "no-such-pool" }, cachev1alpha1.ReasonPoolNotFound}),
		Entry("a file system the pool lacks", refusal{func(_ *world, i *cachev1alpha1.CacheInstance) { i.Spec.Backing.Filesystem = "gpfs" }, cachev1alpha1.ReasonFilesystemNotFound}),
		Entry("a path outside the mount path", refusal{path("/etc"), cachev1alpha1.ReasonPathNotAllowed}),
		Entry("the whole file system", refusal{path(mountAt), cachev1alpha1.ReasonPathNotAllowed}),
		Entry("another namespace's project", refusal{path(mountAt + "/projects/other"), cachev1alpha1.ReasonPathNotAllowed}),
		Entry("a sibling sharing the prefix's name", refusal{sub("-evil"), cachev1alpha1.ReasonPathNotAllowed}),
		Entry("the parent of the prefix", refusal{path(mountAt + "/projects"), cachev1alpha1.ReasonPathNotAllowed}),
		Entry("a uid above the mapping", refusal{id(2000, 1500), cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("a uid below the mapping", refusal{id(999, 1500), cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("root", refusal{id(0, 1500), cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("the root group", refusal{id(1500, 0), cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("a gid outside the mapping", refusal{id(1500, 4242), cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("a supplemental group outside the mapping", refusal{id(1500, 1500, 1600, 3000), cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("supplemental root", refusal{id(1500, 1500, 0), cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("capacity above the pool's ceiling", refusal{func(_ *world, i *cachev1alpha1.CacheInstance) { i.Spec.Capacity = resource.MustParse("600Mi") }, cachev1alpha1.ReasonExceedsCeiling}),
		Entry("write-back threads above the ceiling", refusal{func(_ *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.WriteBack = &cachev1alpha1.WriteBack{Threads: ptr(int32(9))}
		}, cachev1alpha1.ReasonExceedsCeiling}),
		Entry("a stage-out to another namespace's project", refusal{func(_ *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Type, i.Spec.Backing = cachev1alpha1.CacheTypeScratch, nil
			i.Spec.StageOut = &cachev1alpha1.StageOut{Destination: cachev1alpha1.BackingPath{Filesystem: "pfs", Path: mountAt + "/projects/other"}}
		}, cachev1alpha1.ReasonPathNotAllowed}),
		Entry("scratch as an unmapped uid", refusal{func(_ *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Type, i.Spec.Backing = cachev1alpha1.CacheTypeScratch, nil
			i.Spec.RunAs.UID = 7
		}, cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("scratch, whose servers would not share one namespace", refusal{func(_ *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Type, i.Spec.Backing = cachev1alpha1.CacheTypeScratch, nil
		}, cachev1alpha1.ReasonNotSupported}),
		Entry("a dirty watermark above the ceiling", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.WriteBack = &cachev1alpha1.WriteBack{DirtyHighWatermark: ptr(int32(99)), DirtyLowWatermark: ptr(int32(50))}
			setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) { c.DirtyHighWatermark = ptr(int32(95)) })
		}, cachev1alpha1.ReasonExceedsCeiling}),
		Entry("a max file size above the ceiling", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Limits = &cachev1alpha1.Limits{MaxFileSize: ptr(resource.MustParse("2Gi"))}
			setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) { c.MaxFileSize = ptr(resource.MustParse("1Gi")) })
		}, cachev1alpha1.ReasonExceedsCeiling}),
		Entry("more files than the ceiling", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Limits = &cachev1alpha1.Limits{MaxFiles: ptr(int64(1001))}
			setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) { c.MaxFiles = ptr(int64(1000)) })
		}, cachev1alpha1.ReasonExceedsCeiling}),
		Entry("a write window above the ceiling", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Limits = &cachev1alpha1.Limits{WriteWindow: &cachev1alpha1.WriteWindow{Multiplier: ptr(int32(50))}}
			setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) { c.WriteWindowMultiplier = ptr(int32(20)) })
		}, cachev1alpha1.ReasonExceedsCeiling}),
		Entry("capacity beyond the whole pool", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) { c.Capacity = nil })
			i.Spec.Capacity = resource.MustParse("1Gi") // 384Mi on each of 3 nodes of 256Mi
		}, cachev1alpha1.ReasonInsufficientCapacity}),
		Entry("capacity of 8Ei, whose rounding to units wrapped around", refusal{beyondCount("8Ei"), cachev1alpha1.ReasonInsufficientCapacity}),
		Entry("capacity of the largest int64 of bytes", refusal{beyondCount("9223372036854775807"), cachev1alpha1.ReasonInsufficientCapacity}),
		Entry("capacity of 1e30, whose Value() is 0", refusal{beyondCount("1e30"), cachev1alpha1.ReasonInsufficientCapacity}),
		Entry("a namespace the selector of a rule does not select", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Backing.Path = mountAt + "/shared/gold"
			updatePool(w, func(p *cachev1alpha1.CachePool) {
				p.Spec.BackingFilesystems[0].AccessRules = append(p.Spec.BackingFilesystems[0].AccessRules, cachev1alpha1.AccessRule{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "physics"}},
					PathPrefixes:      []cachev1alpha1.AbsolutePath{mountAt + "/shared"},
					UIDRanges:         []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}},
				})
			})
		}, cachev1alpha1.ReasonPathNotAllowed}),
		Entry("a uid the selected rule does not map", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			i.Spec.Backing.Path = mountAt + "/shared/climate"
			updatePool(w, func(p *cachev1alpha1.CachePool) {
				p.Spec.BackingFilesystems[0].AccessRules = append(p.Spec.BackingFilesystems[0].AccessRules, cachev1alpha1.AccessRule{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "climate"}},
					PathPrefixes:      []cachev1alpha1.AbsolutePath{mountAt + "/shared"},
					UIDRanges:         []cachev1alpha1.IDRange{{Min: 3000, Max: 3999}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}},
				})
			})
		}, cachev1alpha1.ReasonIdentityNotAllowed}),
		Entry("a claim of another namespace, granted by a namespace selector", refusal{func(w *world, i *cachev1alpha1.CacheInstance) {
			updatePool(w, func(p *cachev1alpha1.CachePool) {
				fs := &p.Spec.BackingFilesystems[0]
				fs.HostPath, fs.PVC = nil, &cachev1alpha1.PVCSource{ClaimName: "pfs", Namespace: "storage"}
				fs.AccessRules[0].Namespaces = nil
				fs.AccessRules[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "climate"}}
			})
		}, "which servers in namespace"}),
		Entry("a pool whose media cannot be used", refusal{func(w *world, _ *cachev1alpha1.CacheInstance) {
			updatePool(w, func(p *cachev1alpha1.CachePool) { p.Spec.AllocationGranularity = resource.MustParse("512Mi") })
		}, cachev1alpha1.ReasonMediaUnavailable}),
		Entry("a relative path", refusal{path("lus/global"), "absolute"}),
		Entry("a trailing slash", refusal{sub("/"), "'/'"}),
		// The schema refuses these before the webhook sees them; they are here
		// so that the table covers what users try.
		Entry("a path traversal", refusal{sub("/../other"), "'..'"}),
		Entry("a path with an empty element", refusal{sub("//x"), "'//'"}),
	)

	It("accepts what a rule selecting the namespace by label grants", func() {
		updatePool(w, func(p *cachev1alpha1.CachePool) {
			p.Spec.BackingFilesystems[0].AccessRules = append(p.Spec.BackingFilesystems[0].AccessRules, cachev1alpha1.AccessRule{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "climate"}},
				PathPrefixes:      []cachev1alpha1.AbsolutePath{mountAt + "/shared"},
				UIDRanges:         []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}}, GIDRanges: []cachev1alpha1.IDRange{{Min: 1000, Max: 1999}},
			})
		})
		inst := w.instance("64Mi")
		inst.Spec.Backing.Path = mountAt + "/shared/climate"
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
	})

	It("refuses raising a knob above its ceiling on update, and changes of immutable fields", func() {
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		// Merge patches carry no resourceVersion, so the controller's own
		// writes cannot make them conflict.
		change := func(edit func(*cachev1alpha1.CacheInstance)) error {
			cur := inst.DeepCopy()
			edit(cur)
			return k8sClient.Patch(ctx, cur, client.MergeFrom(inst))
		}
		Expect(change(func(c *cachev1alpha1.CacheInstance) { c.Spec.WriteBack.Threads = ptr(int32(64)) })).
			To(MatchError(ContainSubstring(cachev1alpha1.ReasonExceedsCeiling)))
		Expect(change(func(c *cachev1alpha1.CacheInstance) { c.Spec.RunAs.UID = 1501 })).
			To(MatchError(ContainSubstring("immutable")))
		Expect(change(func(c *cachev1alpha1.CacheInstance) {
			c.Spec.Backing.Path = cachev1alpha1.AbsolutePath(w.backing + "/elsewhere")
		})).To(MatchError(ContainSubstring("immutable")))
		Expect(change(func(c *cachev1alpha1.CacheInstance) { c.Spec.Pool = "another" })).
			To(MatchError(ContainSubstring("immutable")))
		Expect(change(func(c *cachev1alpha1.CacheInstance) { c.Spec.WriteBack.Threads = ptr(int32(8)) })).
			To(Succeed(), "a knob within its ceiling may change")
	})

	It("gives a knob taken out of the spec on update the pool's default again, so no ceiling is left behind", func() {
		setCeiling(w, func(c *cachev1alpha1.InstanceCeilings) {
			c.MaxFiles, c.MaxFileSize = ptr(int64(1000)), ptr(resource.MustParse("1Gi"))
		})
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Expect(*inst.Spec.Limits.MaxFiles).To(Equal(int64(1000)), "the ceiling is the default of a pool without one")

		By("removing the limits and the write-back knobs with a merge patch")
		patch := []byte(`{"spec":{"limits":{"maxFiles":null,"maxFileSize":null},"writeBack":{"threads":null,"dirtyHighWatermark":null,"dirtyLowWatermark":null}}}`)
		Expect(k8sClient.Patch(ctx, inst.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		cur := get(inst)(Default)
		Expect(cur.Spec.Limits.MaxFiles).To(Equal(ptr(int64(1000))), "unset, maxFiles is the pool's ceiling, not unlimited")
		Expect(cur.Spec.Limits.MaxFileSize).To(Equal(ptr(resource.MustParse("1Gi"))))
		Expect(cur.Spec.WriteBack.Threads).To(Equal(ptr(int32(2))), "unset, threads are the pool's default")
		Expect(cur.Spec.WriteBack.DirtyHighWatermark).To(Equal(ptr(int32(90))))
		Expect(cur.Spec.WriteBack.DirtyLowWatermark).To(Equal(ptr(int32(80))))
	})

	It("has the reconciler refuse an instance its pool no longer allows, with a condition and an Event", func() {
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(phaseOf(inst), 20*time.Second, 100*time.Millisecond).Should(Equal(cachev1alpha1.PhaseProvisioning))

		By("narrowing the pool's uid mapping below the instance's runAs")
		Eventually(func() error {
			pool := &cachev1alpha1.CachePool{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), pool); err != nil {
				return err
			}
			pool.Spec.BackingFilesystems[0].AccessRules[0].UIDRanges = []cachev1alpha1.IDRange{{Min: 1000, Max: 1099}}
			// A default the instance lacks, which a change of its teardown
			// alone must not bring in (and so be checked against the rules).
			pool.Spec.Defaults.Limits = &cachev1alpha1.LimitsDefaults{MaxFiles: ptr(int64(10))}
			return k8sClient.Update(ctx, pool)
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := get(inst)(g)
			g.Expect(cur.Status.Phase).To(Equal(cachev1alpha1.PhaseFailed))
			c := meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonIdentityNotAllowed))
			g.Expect(c.Message).To(ContainSubstring("1500"))
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
		Eventually(func() []string { return eventReasons(w.ns, inst.Name) }, 10*time.Second).
			Should(ContainElement(cachev1alpha1.ReasonIdentityNotAllowed))

		By("still taking its requests and teardown policy, which the pool's rules do not govern")
		change := func(edit func(*cachev1alpha1.CacheInstance)) error {
			cur := inst.DeepCopy()
			edit(cur)
			return k8sClient.Patch(ctx, cur, client.MergeFrom(inst))
		}
		Expect(change(func(c *cachev1alpha1.CacheInstance) {
			c.Annotations = map[string]string{cachev1alpha1.AnnotationRequest: `{"id":"r-1","operation":"flush"}`}
		})).To(Succeed())
		Expect(change(func(c *cachev1alpha1.CacheInstance) {
			c.Spec.Teardown = &cachev1alpha1.Teardown{Policy: cachev1alpha1.TeardownDiscard}
		})).To(Succeed())
		Expect(get(inst)(Default).Spec.Limits.MaxFiles).To(BeNil(), "a change of the teardown filled in a knob")
		Expect(change(func(c *cachev1alpha1.CacheInstance) { c.Spec.WriteBack.Threads = ptr(int32(7)) })).
			To(MatchError(ContainSubstring(cachev1alpha1.ReasonIdentityNotAllowed)), "a knob it governs is checked against the rules")

		By("telling a pod created for it afterwards why it stays gated")
		late := jobPod(w.ns, "late", inst.Name)
		Expect(k8sClient.Create(ctx, late)).To(Succeed())
		Expect(late.Spec.SchedulingGates).To(ContainElement(cacheGate))
		Eventually(func() []string { return eventReasons(w.ns, late.Name) }, 20*time.Second, 200*time.Millisecond).
			Should(ContainElement(cachev1alpha1.ReasonInstanceUnavailable))
		Expect(k8sClient.Delete(ctx, late)).To(Succeed())

		By("following who mounts it still, and saying its servers run on")
		lease := createMountLease(inst, "node-a", "job-0/cache")
		Eventually(func(g Gomega) []cachev1alpha1.Mount {
			return get(inst)(g).Status.ActiveMounts
		}, 10*time.Second, 200*time.Millisecond).Should(ConsistOf(cachev1alpha1.Mount{Node: "node-a", Pod: "job-0", Volume: "cache"}))
		c := meta.FindStatusCondition(get(inst)(Default).Status.Conditions, cachev1alpha1.ConditionAccepted)
		Expect(c.Message).To(ContainSubstring("the servers run on"))
		Expect(get(inst)(Default).Status.Phase).To(Equal(cachev1alpha1.PhaseFailed))
		Expect(k8sClient.Delete(ctx, lease)).To(Succeed())
	})
})

// updatePool changes the world's pool and waits until the API server has it,
// so that the webhook, which reads pools from the API server, sees it.
func updatePool(w *world, edit func(*cachev1alpha1.CachePool)) {
	GinkgoHelper()
	Eventually(func() error {
		pool := &cachev1alpha1.CachePool{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(w.pool), pool); err != nil {
			return err
		}
		edit(pool)
		return k8sClient.Update(ctx, pool)
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
}

func setCeiling(w *world, edit func(*cachev1alpha1.InstanceCeilings)) {
	GinkgoHelper()
	updatePool(w, func(p *cachev1alpha1.CachePool) { edit(p.Spec.Ceilings) })
}
