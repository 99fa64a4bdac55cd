package params

// AnnotationPrefix starts the PVC annotations that set volume keys, such as
// "csi.burstcache.io/backingPath".
const AnnotationPrefix = "csi.burstcache.io/"

// sidecarPrefix starts the parameters the CSI external-provisioner adds with
// --extra-create-metadata.
const sidecarPrefix = "csi.storage.k8s.io/"

// StorageClass parameter and PVC annotation keys.
const (
	// Pool names the CachePool of dynamic volumes; StorageClass only.
	Pool = "pool"
	// Instance names an existing CacheInstance of the PVC's namespace that
	// the volume mounts instead of a new one (a named volume). Such a volume
	// never deletes the instance.
	Instance = "instance"
	// SubPath is the directory, relative to the instance's root, that pods
	// see.
	SubPath = "subPath"

	// BackingFilesystem names the pool's backing file system; optional when
	// the pool has exactly one.
	BackingFilesystem = "backingFilesystem"
	// BackingPath is the absolute path cached (DataWarp pfs=); required for
	// type cache.
	BackingPath = "backingPath"
	// Type is "cache" (default) or "scratch".
	Type = "type"
	// AccessMode is "Striped" (default) or "LoadBalanced".
	AccessMode = "accessMode"

	// MaxFileSize is a quantity, such as "10Gi".
	MaxFileSize = "maxFileSize"
	// MaxFiles is a count.
	MaxFiles = "maxFiles"
	// WriteWindowMultiplier is a count of capacities per window, 1 to 1000.
	WriteWindowMultiplier = "writeWindowMultiplier"
	// WriteWindowLength is a duration, such as "24h".
	WriteWindowLength = "writeWindowLength"

	// WriteBackThreads is a count, 1 to 64.
	WriteBackThreads = "writeBackThreads"
	// DirtyHighWatermark is a percentage, 1 to 100.
	DirtyHighWatermark = "dirtyHighWatermark"
	// DirtyLowWatermark is a percentage, 1 to 100.
	DirtyLowWatermark = "dirtyLowWatermark"
	// Durability is "Cache" or "Backing".
	Durability = "durability"
	// EvictionHighWatermark is a percentage, 1 to 100.
	EvictionHighWatermark = "evictionHighWatermark"
	// EvictionLowWatermark is a percentage, 1 to 100.
	EvictionLowWatermark = "evictionLowWatermark"

	// Preload is a list of absolute paths copied up before the volume is
	// Ready: separated by commas, or, for paths that hold commas, a JSON
	// array of strings.
	Preload = "preload"

	// RunAsUID, RunAsGID and SupplementalGroups (comma-separated) ask for
	// the identity that touches the backing file system; the pool must map
	// it to the namespace. Without them, the one identity the pool maps to
	// the namespace is used.
	RunAsUID = "runAsUID"
	// RunAsGID is the primary group; see RunAsUID.
	RunAsGID = "runAsGID"
	// SupplementalGroups are further groups; see RunAsUID.
	SupplementalGroups = "supplementalGroups"
)

// namedKeys are the keys a named volume accepts; the others describe a new
// instance.
var namedKeys = map[string]bool{Instance: true, SubPath: true, Pool: true}
