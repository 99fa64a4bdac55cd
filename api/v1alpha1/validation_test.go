package v1alpha1_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// scratch turns the valid cache instance into a valid scratch instance, then
// applies edits.
func scratch(edits ...edit) edit {
	all := append([]edit{set("spec.type", "scratch"), unset("spec.backing")}, edits...)
	return func(obj map[string]any) {
		for _, e := range all {
			e(obj)
		}
	}
}

// named gives the object a fixed name instead of a generated one.
func named(name string) edit {
	return func(obj map[string]any) {
		unset("metadata.generateName")(obj)
		set("metadata.name", name)(obj)
	}
}

var _ = Describe("CacheInstance validation", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("accepts the instance that the bad specs start from", func() {
		Expect(k8sClient.Create(ctx, object(validInstanceYAML, ns))).To(Succeed())
		Expect(k8sClient.Create(ctx, object(validInstanceYAML, ns, named("run-42-of-the-climate-model-at-the-finest-grid")))).To(Succeed())
		Expect(k8sClient.Create(ctx, object(validInstanceYAML, ns, scratch()))).To(Succeed())
	})

	It("accepts Discard when it is written explicitly, and a backing path of /", func() {
		obj := object(validInstanceYAML, ns,
			set("spec.teardown", "{policy: Discard, timeout: 1h30m}"),
			set("spec.backing.path", "/"),
			set("spec.preload", "[/, /lus/global]"))
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	})

	It("accepts paths of any characters but NUL, quoted or not", func() {
		obj := object(validInstanceYAML, ns,
			set("spec.backing.path", `"/lus/global/caf\u00e9 \"-rf\"\\x"`),
			set("spec.preload", `["/lus/global/caf\u00e9 \"-rf\"\\x/new\nline\ttab/\uFFFD/ /..."]`))
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	})

	It("rejects a name that cannot name the instance's Service and server pods", func() {
		for _, name := range []string{
			"run-of-the-climate-model-with-the-finest-grid-yet", // too long for <name>-server-<i> host names
			"run.42", // a Service name has no dots
			"42run",  // nor a leading digit
		} {
			err := k8sClient.Create(ctx, object(validInstanceYAML, ns, named(name)))
			// A rule on metadata can only sit at the root, whose errors
			// name no field; the message names it.
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: want an Invalid error, got: %v", name, err)
			Expect(err).To(MatchError(ContainSubstring("metadata.name must be at most 47 characters of a-z, 0-9 and '-', start with a letter")), name)
		}
	})

	DescribeTable("rejects a bad spec, naming the field and the rule",
		func(field, message string, edits ...edit) {
			err := k8sClient.Create(ctx, object(validInstanceYAML, ns, edits...))
			expectRejected(err, field, message)
		},
		// Backing path: absolute and clean.
		Entry("a relative backing path", "spec.backing.path", "path must be absolute (start with '/')",
			set("spec.backing.path", "lus/global/projects")),
		Entry("a backing path with ..", "spec.backing.path", "path must not contain '..' elements",
			set("spec.backing.path", "/lus/global/projects/../../../etc")),
		Entry("a backing path ending in ..", "spec.backing.path", "path must not contain '..' elements",
			set("spec.backing.path", "/lus/global/..")),
		Entry("a backing path with a trailing slash", "spec.backing.path", "path must not end with '/'",
			set("spec.backing.path", "/lus/global/projects/")),
		Entry("a backing path with //", "spec.backing.path", "path must not contain '//'",
			set("spec.backing.path", "/lus//global")),
		Entry("a backing path with /./", "spec.backing.path", "path must not contain '.' elements",
			set("spec.backing.path", "/lus/./global")),
		Entry("a backing path with a NUL byte", "spec.backing.path", "path must not contain a NUL byte",
			set("spec.backing.path", `"/lus/global/a\0b"`)),
		Entry("a backing file system that is not a DNS label", "spec.backing.filesystem", "should match",
			set("spec.backing.filesystem", "Lustre_1")),

		// Capacity.
		Entry("zero capacity", "spec.capacity", "spec.capacity must be greater than zero",
			set("spec.capacity", "0")),
		Entry("negative capacity", "spec.capacity", "spec.capacity must be greater than zero",
			set("spec.capacity", "-1Ti")),
		Entry("no capacity", "spec.capacity", "Required value",
			unset("spec.capacity")),

		// Pool.
		Entry("no pool", "spec.pool", "Required value",
			unset("spec.pool")),
		Entry("a pool name that is not a DNS subdomain", "spec.pool", "should match",
			set("spec.pool", "Lustre_NVMe")),

		// Type and access mode.
		Entry("an unknown type", "spec.type", `supported values: "cache", "scratch"`,
			set("spec.type", "persistent")),
		Entry("an unknown access mode", "spec.accessMode", `supported values: "Striped", "LoadBalanced"`,
			set("spec.accessMode", "striped")),
		Entry("a cache instance without backing", "spec.backing",
			"spec.backing is required when spec.type is cache",
			unset("spec.backing")),
		Entry("a scratch instance with a backing path", "spec.backing",
			"spec.backing must not be set when spec.type is scratch",
			set("spec.type", "scratch")),
		Entry("LoadBalanced scratch", "spec.accessMode",
			"spec.accessMode LoadBalanced needs spec.type cache",
			scratch(set("spec.accessMode", "LoadBalanced"))),

		// Write-back.
		Entry("zero write-back threads", "spec.writeBack.threads", "should be greater than or equal to 1",
			set("spec.writeBack", "{threads: 0}")),
		Entry("65 write-back threads", "spec.writeBack.threads", "should be less than or equal to 64",
			set("spec.writeBack", "{threads: 65}")),
		Entry("a dirty low watermark equal to the high one", "spec.writeBack.dirtyLowWatermark",
			"spec.writeBack.dirtyLowWatermark must be lower than spec.writeBack.dirtyHighWatermark",
			set("spec.writeBack", "{dirtyHighWatermark: 50, dirtyLowWatermark: 50}")),
		Entry("a dirty high watermark above 100", "spec.writeBack.dirtyHighWatermark",
			"should be less than or equal to 100",
			set("spec.writeBack", "{dirtyHighWatermark: 101, dirtyLowWatermark: 50}")),
		Entry("a dirty low watermark of 0", "spec.writeBack.dirtyLowWatermark",
			"should be greater than or equal to 1",
			set("spec.writeBack", "{dirtyHighWatermark: 50, dirtyLowWatermark: 0}")),
		Entry("a dirty high watermark without a low one", "spec.writeBack.dirtyLowWatermark",
			"spec.writeBack.dirtyHighWatermark and spec.writeBack.dirtyLowWatermark must be set together",
			set("spec.writeBack", "{dirtyHighWatermark: 70}")),
		Entry("an unknown durability", "spec.writeBack.durability", `supported values: "Cache", "Backing"`,
			set("spec.writeBack", "{durability: PFS}")),
		Entry("Backing durability for scratch", "spec.writeBack.durability",
			"spec.writeBack.durability Backing needs spec.type cache",
			scratch(set("spec.writeBack", "{durability: Backing}"))),

		// Eviction.
		Entry("an eviction low watermark above the high one", "spec.eviction.lowWatermark",
			"spec.eviction.lowWatermark must be lower than spec.eviction.highWatermark",
			set("spec.eviction", "{highWatermark: 80, lowWatermark: 90}")),
		Entry("an eviction high watermark of 0", "spec.eviction.highWatermark",
			"should be greater than or equal to 1",
			set("spec.eviction", "{highWatermark: 0, lowWatermark: 0}")),

		// Limits.
		Entry("a zero maxFileSize", "spec.limits.maxFileSize",
			"spec.limits.maxFileSize must be greater than zero",
			set("spec.limits", `{maxFileSize: "0"}`)),
		Entry("zero maxFiles", "spec.limits.maxFiles", "should be greater than or equal to 1",
			set("spec.limits", "{maxFiles: 0}")),
		Entry("a write window multiplier of 0", "spec.limits.writeWindow.multiplier",
			"should be greater than or equal to 1",
			set("spec.limits", "{writeWindow: {multiplier: 0}}")),
		Entry("a write window length in days", "spec.limits.writeWindow.length",
			"spec.limits.writeWindow.length must be a positive duration",
			set("spec.limits", "{writeWindow: {length: 1d}}")),

		// Preload and stage-out.
		Entry("a preload path outside the backing path", "spec.preload",
			"every spec.preload path must be spec.backing.path or a path under it",
			set("spec.preload", "[/lus/global/projects/climate/input, /lus/global/projects/climatex]")),
		Entry("a relative preload path", "spec.preload[0]", "path must be absolute (start with '/')",
			set("spec.preload", "[input/era5]")),
		Entry("a preload path with a NUL byte", "spec.preload[0]", "path must not contain a NUL byte",
			set("spec.preload", `["/lus/global/projects/climate/in\0put"]`)),
		Entry("preload on scratch", "spec.preload", "spec.preload needs spec.type cache",
			scratch(set("spec.preload", "[/lus/global/projects/climate]"))),
		Entry("stageOut on a cache instance", "spec.stageOut", "spec.stageOut is only for spec.type scratch",
			set("spec.stageOut", "{destination: {filesystem: lustre, path: /lus/global/out}}")),
		Entry("a stageOut destination with ..", "spec.stageOut.destination.path",
			"path must not contain '..' elements",
			scratch(set("spec.stageOut", "{destination: {filesystem: lustre, path: /lus/global/../x}}"))),

		// Teardown.
		Entry("an unknown teardown policy", "spec.teardown.policy", `supported values: "WriteBack", "Discard"`,
			set("spec.teardown", "{policy: Drop}")),
		Entry("a negative teardown timeout", "spec.teardown.timeout",
			"spec.teardown.timeout must be a positive duration",
			set("spec.teardown", "{timeout: -1h}")),
		Entry("a zero teardown timeout", "spec.teardown.timeout",
			"spec.teardown.timeout must be a positive duration",
			set("spec.teardown", "{timeout: 0s}")),

		// Identity.
		Entry("no runAs", "spec.runAs", "Required value",
			unset("spec.runAs")),
		Entry("a negative uid", "spec.runAs.uid", "should be greater than or equal to 0",
			set("spec.runAs.uid", "-1")),
		Entry("a negative gid", "spec.runAs.gid", "should be greater than or equal to 0",
			set("spec.runAs.gid", "-2")),
		Entry("a uid past 32 bits", "spec.runAs.uid", "should be less than or equal to 4294967294",
			set("spec.runAs.uid", "4294967295")),
		Entry("a negative supplemental group", "spec.runAs.supplementalGroups[1]",
			"should be greater than or equal to 0",
			set("spec.runAs.supplementalGroups", "[20042, -5]")),
	)
})

var _ = Describe("CachePool validation", func() {
	It("accepts the pool that the bad specs start from", func() {
		Expect(k8sClient.Create(ctx, object(validPoolYAML, ""))).To(Succeed())
	})

	It("accepts the extent sizes at the ends of the range, and one of half the granularity", func() {
		Expect(k8sClient.Create(ctx, object(validPoolYAML, "", set("spec.extentSize", "4Ki")))).To(Succeed())
		Expect(k8sClient.Create(ctx, object(validPoolYAML, "", set("spec.extentSize", "1Gi")))).To(Succeed())
		Expect(k8sClient.Create(ctx, object(validPoolYAML, "", set("spec.extentSize", "32Mi"), set("spec.allocationGranularity", "64Mi")))).To(Succeed())
	})

	It("accepts media beside a backing file system whose path begins alike", func() {
		Expect(k8sClient.Create(ctx, object(validPoolYAML, "", set("spec.media.hostPath.path", "/lus/global-nvme")))).To(Succeed())
	})

	DescribeTable("rejects a bad spec, naming the field and the rule",
		func(field, message string, edits ...edit) {
			err := k8sClient.Create(ctx, object(validPoolYAML, "", edits...))
			expectRejected(err, field, message)
		},
		// Media.
		Entry("both host path and StorageClass media", "spec.media",
			"spec.media must set exactly one of hostPath and storageClass",
			set("spec.media.storageClass", "{name: local-nvme}")),
		Entry("no media kind", "spec.media",
			"spec.media must set exactly one of hostPath and storageClass",
			unset("spec.media.hostPath")),
		Entry("a relative media host path", "spec.media.hostPath.path", "path must be absolute",
			set("spec.media.hostPath.path", "mnt/nvme")),
		Entry("media inside a backing file system", "spec.media.hostPath.path",
			"spec.media.hostPath.path and the hostPath.path of every backing file system must lie apart",
			set("spec.media.hostPath.path", "/lus/global/nvme")),
		Entry("a backing file system inside the media", "spec.media.hostPath.path",
			"spec.media.hostPath.path and the hostPath.path of every backing file system must lie apart",
			set("spec.media.hostPath.path", "/lus")),
		Entry("media on a backing file system's own path", "spec.media.hostPath.path",
			"spec.media.hostPath.path and the hostPath.path of every backing file system must lie apart",
			set("spec.media.hostPath.path", "/lus/global")),
		Entry("media inside a second backing file system", "spec.media.hostPath.path",
			"spec.media.hostPath.path and the hostPath.path of every backing file system must lie apart",
			set("spec.backingFilesystems", `[
				{name: lustre, mountPath: /lus/global, hostPath: {path: /lus/global}},
				{name: home, mountPath: /home, hostPath: {path: /mnt/home}}]`),
			set("spec.media.hostPath.path", "/mnt/home/cache")),
		Entry("zero capacity per node", "spec.media.capacityPerNode",
			"spec.media.capacityPerNode must be greater than zero",
			set("spec.media.capacityPerNode", "0Gi")),
		Entry("zero allocation granularity", "spec.allocationGranularity",
			"spec.allocationGranularity must be greater than zero",
			set("spec.allocationGranularity", "0")),
		// Extent sizes the cache servers refuse to start with.
		Entry("an extent below 4Ki", "spec.extentSize",
			"spec.extentSize must be from 4Ki to 1Gi, the extent sizes cache servers start with",
			set("spec.extentSize", "1Ki")),
		Entry("an extent above 1Gi", "spec.extentSize",
			"spec.extentSize must be from 4Ki to 1Gi, the extent sizes cache servers start with",
			set("spec.extentSize", "2Gi")),
		Entry("an extent of the whole granularity, one extent per server", "spec.extentSize",
			"spec.extentSize (1Mi unless set) must be at most half of spec.allocationGranularity",
			set("spec.extentSize", "64Mi"), set("spec.allocationGranularity", "64Mi")),
		Entry("the default extent with a granularity of 1Mi", "spec.extentSize",
			"spec.extentSize (1Mi unless set) must be at most half of spec.allocationGranularity",
			set("spec.allocationGranularity", "1Mi")),

		// Backing file systems.
		Entry("no backing file system", "spec.backingFilesystems", "should have at least 1 items",
			set("spec.backingFilesystems", "[]")),
		Entry("two access kinds on one file system", "spec.backingFilesystems[0]",
			"spec.backingFilesystems[*] must set exactly one of hostPath, nfs and pvc",
			set("spec.backingFilesystems[0].nfs", "{server: nfs.example.org, export: /export}")),
		Entry("no access kind", "spec.backingFilesystems[0]",
			"spec.backingFilesystems[*] must set exactly one of hostPath, nfs and pvc",
			unset("spec.backingFilesystems[0].hostPath")),
		Entry("two file systems with one name", "spec.backingFilesystems[1]", "Duplicate value",
			set("spec.backingFilesystems", `[
				{name: lustre, mountPath: /lus/global, hostPath: {path: /lus/global}},
				{name: lustre, mountPath: /lus/other, hostPath: {path: /lus/other}}]`)),
		Entry("an NFS export that is not clean", "spec.backingFilesystems[0].nfs.export",
			"path must not end with '/'",
			unset("spec.backingFilesystems[0].hostPath"),
			set("spec.backingFilesystems[0].nfs", "{server: nfs.example.org, export: /export/home/}")),

		// Access rules.
		Entry("a path prefix outside the mount path", "spec.backingFilesystems[0].accessRules",
			"spec.backingFilesystems[*].accessRules[*].pathPrefixes must be mountPath or paths under it",
			set("spec.backingFilesystems[0].accessRules[0].pathPrefixes", "[/lus/globalx/projects]")),
		Entry("a path prefix with ..", "spec.backingFilesystems[0].accessRules[0].pathPrefixes[0]",
			"path must not contain '..' elements",
			set("spec.backingFilesystems[0].accessRules[0].pathPrefixes", "[/lus/global/projects/..]")),
		Entry("an access rule for no namespace", "spec.backingFilesystems[0].accessRules[0]",
			"an access rule must set namespaces, namespaceSelector or both",
			unset("spec.backingFilesystems[0].accessRules[0].namespaces")),
		Entry("a uid range with min > max", "spec.backingFilesystems[0].accessRules[0].uidRanges[0]",
			"an ID range must have min <= max",
			set("spec.backingFilesystems[0].accessRules[0].uidRanges", "[{min: 2000, max: 1000}]")),
		Entry("a uid range with root but no allowRoot", "spec.backingFilesystems[0].accessRules[0].uidRanges",
			"uidRanges include 0 (root) but allowRoot is false",
			set("spec.backingFilesystems[0].accessRules[0].uidRanges", "[{min: 0, max: 1000}]")),
		Entry("a gid range with root but no allowRoot", "spec.backingFilesystems[0].accessRules[0].gidRanges",
			"gidRanges include 0 (root) but allowRoot is false",
			set("spec.backingFilesystems[0].accessRules[0].gidRanges", "[{min: 0, max: 0}]")),
		Entry("no gid ranges", "spec.backingFilesystems[0].accessRules[0].gidRanges", "Required value",
			unset("spec.backingFilesystems[0].accessRules[0].gidRanges")),

		// Defaults and ceilings.
		Entry("default dirty watermarks low >= high", "spec.defaults.writeBack.dirtyLowWatermark",
			"spec.defaults.writeBack.dirtyLowWatermark must be lower than spec.defaults.writeBack.dirtyHighWatermark",
			set("spec.defaults", "{writeBack: {dirtyHighWatermark: 20}}")),
		Entry("default eviction watermarks low >= high", "spec.defaults.eviction.lowWatermark",
			"spec.defaults.eviction.lowWatermark must be lower than spec.defaults.eviction.highWatermark",
			set("spec.defaults", "{eviction: {highWatermark: 70, lowWatermark: 70}}")),
		Entry("default threads above the ceiling", "spec.defaults.writeBack.threads",
			"spec.defaults.writeBack.threads must not exceed spec.ceilings.writeBackThreads",
			set("spec.ceilings", "{writeBackThreads: 2}")),
		Entry("default dirty watermark above the ceiling", "spec.defaults.writeBack.dirtyHighWatermark",
			"spec.defaults.writeBack.dirtyHighWatermark must not exceed spec.ceilings.dirtyHighWatermark",
			set("spec.ceilings", "{dirtyHighWatermark: 50}")),
		Entry("default max file size above the ceiling", "spec.defaults.limits.maxFileSize",
			"spec.defaults.limits.maxFileSize must not exceed spec.ceilings.maxFileSize",
			set("spec.defaults", "{limits: {maxFileSize: 2Ti}}"), set("spec.ceilings", "{maxFileSize: 1Ti}")),
		Entry("default max files above the ceiling", "spec.defaults.limits.maxFiles",
			"spec.defaults.limits.maxFiles must not exceed spec.ceilings.maxFiles",
			set("spec.defaults", "{limits: {maxFiles: 1000}}"), set("spec.ceilings", "{maxFiles: 100}")),
		Entry("a default write window in days", "spec.defaults.limits.writeWindow.length",
			"spec.defaults.limits.writeWindow.length must be a positive duration",
			set("spec.defaults", "{limits: {writeWindow: {length: 7d}}}")),
	)
})
