package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// createInstance creates the valid instance in ns and returns it as the API
// server stored it.
func createInstance(ns string) *cachev1alpha1.CacheInstance {
	inst := &cachev1alpha1.CacheInstance{}
	ExpectWithOffset(1, yaml.UnmarshalStrict([]byte(validInstanceYAML), inst)).To(Succeed())
	inst.Namespace = ns
	ExpectWithOffset(1, k8sClient.Create(ctx, inst)).To(Succeed())
	return inst
}

var _ = Describe("CacheInstance updates", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	DescribeTable("reject a change of an immutable field",
		func(field, message string, change func(*cachev1alpha1.CacheInstance)) {
			inst := createInstance(ns)
			change(inst)
			expectRejected(k8sClient.Update(ctx, inst), field, message)
		},
		Entry("type", "spec.type", "spec.type is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.Type = cachev1alpha1.CacheTypeScratch }),
		Entry("accessMode", "spec.accessMode", "spec.accessMode is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.AccessMode = cachev1alpha1.AccessModeLoadBalanced }),
		Entry("pool", "spec.pool", "spec.pool is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.Pool = "nfs-home" }),
		Entry("backing path", "spec.backing", "spec.backing is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.Backing.Path = "/lus/global/projects/climate/run-43" }),
		Entry("backing file system", "spec.backing", "spec.backing is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.Backing.Filesystem = "lustre2" }),
		Entry("capacity", "spec.capacity", "spec.capacity is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.Capacity = resource.MustParse("2Ti") }),
		Entry("durability", "spec.writeBack.durability", "spec.writeBack.durability is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.WriteBack.Durability = cachev1alpha1.DurabilityBacking }),
		Entry("runAs uid", "spec.runAs", "spec.runAs is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.RunAs.UID = 0 }),
		Entry("runAs supplemental groups", "spec.runAs", "spec.runAs is immutable",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.RunAs.SupplementalGroups = []int64{20042} }),
		// Removing the backing skips the backing's own transition rule (there
		// is no new value to compare); the spec-level rule still holds it.
		Entry("backing, by removing it", "spec.backing", "spec.backing is required when spec.type is cache",
			func(i *cachev1alpha1.CacheInstance) { i.Spec.Backing = nil }),
	)

	It("accepts changes of the mutable fields, including Discard on a deleted instance", func() {
		inst := createInstance(ns)
		inst.Spec.WriteBack.Threads = ptr.To[int32](16)
		inst.Spec.Preload = []cachev1alpha1.AbsolutePath{"/lus/global/projects/climate/input"}
		inst.Spec.Limits = &cachev1alpha1.Limits{MaxFiles: ptr.To[int64](1000)}
		Expect(k8sClient.Update(ctx, inst)).To(Succeed())

		// A finalizer keeps the object while its deletion is pending, as the
		// controller's does during write-back.
		inst.Finalizers = []string{cachev1alpha1.Finalizer}
		Expect(k8sClient.Update(ctx, inst)).To(Succeed())
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(inst), inst)).To(Succeed())
		Expect(inst.DeletionTimestamp).NotTo(BeNil())
		inst.Spec.Teardown.Policy = cachev1alpha1.TeardownDiscard
		inst.Spec.Teardown.Timeout = &metav1.Duration{Duration: time.Minute}
		Expect(k8sClient.Update(ctx, inst)).To(Succeed())

		inst.Finalizers = nil
		Expect(k8sClient.Update(ctx, inst)).To(Succeed())
	})

	It("treats capacities that are equal as quantities as unchanged", func() {
		// A Go client writes 1024Gi back as 1Ti; that must not count as a
		// change of an immutable field, or every controller update fails.
		u := object(validInstanceYAML, ns, set("spec.capacity", "1024Gi"),
			set("spec.runAs.supplementalGroups", "[]"))
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		inst := &cachev1alpha1.CacheInstance{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), inst)).To(Succeed())
		inst.Labels = map[string]string{"touched": "yes"}
		Expect(k8sClient.Update(ctx, inst)).To(Succeed())
		Expect(inst.Spec.Capacity.String()).To(Equal("1Ti"))
	})
})
