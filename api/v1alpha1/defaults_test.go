package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Defaults", func() {
	It("fill in a minimal CacheInstance, and leave the pool-defaulted knobs unset", func() {
		u := object(validInstanceYAML, newNamespace())
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		inst := &cachev1alpha1.CacheInstance{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), inst)).To(Succeed())

		Expect(inst.Spec.Type).To(Equal(cachev1alpha1.CacheTypeCache))
		Expect(inst.Spec.AccessMode).To(Equal(cachev1alpha1.AccessModeStriped))
		Expect(inst.Spec.Teardown).NotTo(BeNil())
		Expect(inst.Spec.Teardown.Policy).To(Equal(cachev1alpha1.TeardownWriteBack))
		Expect(inst.Spec.Teardown.Timeout).To(BeNil(), "no timeout unless asked for")
		Expect(inst.Spec.WriteBack).NotTo(BeNil())
		Expect(inst.Spec.WriteBack.Durability).To(Equal(cachev1alpha1.DurabilityCache))
		Expect(inst.Spec.ClientCache).NotTo(BeNil())
		Expect(inst.Spec.ClientCache.Enabled).To(BeFalse())

		// These come from the pool (spec.defaults), filled in by the
		// webhook; a schema default here would hide the pool's.
		Expect(inst.Spec.WriteBack.Threads).To(BeNil())
		Expect(inst.Spec.WriteBack.DirtyHighWatermark).To(BeNil())
		Expect(inst.Spec.WriteBack.DirtyLowWatermark).To(BeNil())
		Expect(inst.Spec.Eviction).To(BeNil())
		Expect(inst.Spec.Limits).To(BeNil())
	})

	It("fill in a minimal CachePool with the instance defaults", func() {
		u := object(validPoolYAML, "")
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		pool := &cachev1alpha1.CachePool{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(u), pool)).To(Succeed())

		Expect(pool.Spec.ExtentSize).To(HaveValue(Equal(resource.MustParse("1Mi"))))
		d := pool.Spec.Defaults
		Expect(d).NotTo(BeNil())
		Expect(d.WriteBack).To(HaveValue(Equal(cachev1alpha1.WriteBackDefaults{
			Threads: 4, DirtyHighWatermark: 60, DirtyLowWatermark: 30,
		})))
		Expect(d.Eviction).To(HaveValue(Equal(cachev1alpha1.EvictionDefaults{
			HighWatermark: 90, LowWatermark: 80,
		})))
		Expect(d.Limits).NotTo(BeNil())
		Expect(d.Limits.MaxFileSize).To(BeNil())
		Expect(d.Limits.MaxFiles).To(BeNil())
		Expect(d.Limits.WriteWindow).NotTo(BeNil())
		Expect(d.Limits.WriteWindow.Multiplier).To(Equal(int32(10)))
		Expect(d.Limits.WriteWindow.Length).To(HaveValue(HaveField("Duration", 24*time.Hour)))
		Expect(d.Teardown).To(BeNil(), "no teardown timeout, and never a policy, by default")
		Expect(pool.Spec.BackingFilesystems[0].AccessRules[0].AllowRoot).To(BeFalse())
	})

	It("keep status out of spec updates (status subresource)", func() {
		inst := createInstance(newNamespace())
		inst.Status.Phase = cachev1alpha1.PhaseReady
		Expect(k8sClient.Update(ctx, inst)).To(Succeed())
		Expect(inst.Status.Phase).To(BeEmpty())

		inst.Status.Phase = cachev1alpha1.PhaseReady
		inst.Status.ReadyServers = 3
		Expect(k8sClient.Status().Update(ctx, inst)).To(Succeed())
		Expect(inst.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))
	})
})
