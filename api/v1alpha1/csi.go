package v1alpha1

// DriverName is the name of burstcache's CSI driver, as CSIDriver objects,
// StorageClasses and PersistentVolumes spell it.
const DriverName = "csi.burstcache.io"

// What the CSI driver, the operator and the cache servers agree on.
const (
	// ComponentMount is the LabelComponent value of the Leases that CSI node
	// plugins hold, in the instance's namespace, while a node has the
	// instance staged: while the node's FUSE mount of it exists and may hold
	// data the servers have not seen. A mount Lease also carries
	// LabelInstance; its spec.holderIdentity is the node's name. Teardown
	// waits until none is left.
	ComponentMount = "mount"

	// AnnotationMountPods on a mount Lease lists the pods the node publishes
	// the instance to, as comma-separated "pod/volume" entries.
	AnnotationMountPods = "cache.burstcache.io/pods"

	// DataSecretKey is the key, in an instance's data Secret, of the shared
	// secret that the instance's servers and mounts prove to each other.
	DataSecretKey = "secret"

	// MountKeySecretName is the default name of the Secret, in the
	// namespace burstcache is installed in, that holds the mount key: the
	// manager creates it and gives its public half to the servers of
	// instances that act as their callers, which then admit only mounts
	// that sign with its private half, which the CSI node plugins read.
	// Users who may read the instances' data Secrets cannot read it.
	MountKeySecretName = "burstcache-mount-key"
	// MountKeySecretKey is the key, in that Secret, of the private mount
	// key (see cacheserver/control.NewMountKey).
	MountKeySecretKey = "mount.key"
)

// DataSecretName returns the name of the Secret, in the instance's
// namespace, that holds the data-path shared secret of the instance named
// instance. The operator creates it before the servers; PersistentVolumes of
// the instance name it as their nodeStageSecretRef, so that kubelet hands it
// to the node plugin and nothing else needs to read Secrets.
func DataSecretName(instance string) string { return instance + "-secret" }
