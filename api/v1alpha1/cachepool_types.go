package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cpool,categories=burstcache
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the pool can serve instances"
// +kubebuilder:printcolumn:name="Total",type=string,JSONPath=`.status.totalCapacity`,description="Cache capacity of all nodes"
// +kubebuilder:printcolumn:name="Free",type=string,JSONPath=`.status.freeCapacity`,description="Capacity not allocated to instances"
// +kubebuilder:printcolumn:name="Instances",type=integer,JSONPath=`.status.instances`,description="Instances allocated from the pool"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// CachePool is written by cluster administrators. It says which nodes hold
// cache media and how much, which backing file systems may be cached and how
// cache servers reach them, which namespaces may cache which paths as which
// users, and the defaults and ceilings of the instances' settings.
type CachePool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the administrator configures.
	// +required
	Spec CachePoolSpec `json:"spec"`

	// status is what burstcache observed. It is written by the controller.
	// +optional
	Status CachePoolStatus `json:"status,omitempty"`
}

// CachePoolSpec is the configuration of a pool.
// +kubebuilder:validation:XValidation:rule="!has(self.extentSize) || quantity(string(self.extentSize)).add(quantity(string(self.extentSize))).compareTo(quantity(string(self.allocationGranularity))) <= 0",message="spec.extentSize (1Mi unless set) must be at most half of spec.allocationGranularity: a cache server's capacity is a multiple of the granularity and must hold at least 2 extents",fieldPath=.extentSize
// +kubebuilder:validation:XValidation:rule="!has(self.ceilings) || !has(self.ceilings.writeBackThreads) || !has(self.defaults) || !has(self.defaults.writeBack) || !has(self.defaults.writeBack.threads) || self.defaults.writeBack.threads <= self.ceilings.writeBackThreads",message="spec.defaults.writeBack.threads must not exceed spec.ceilings.writeBackThreads",fieldPath=.defaults.writeBack.threads
// +kubebuilder:validation:XValidation:rule="!has(self.ceilings) || !has(self.ceilings.dirtyHighWatermark) || !has(self.defaults) || !has(self.defaults.writeBack) || !has(self.defaults.writeBack.dirtyHighWatermark) || self.defaults.writeBack.dirtyHighWatermark <= self.ceilings.dirtyHighWatermark",message="spec.defaults.writeBack.dirtyHighWatermark must not exceed spec.ceilings.dirtyHighWatermark",fieldPath=.defaults.writeBack.dirtyHighWatermark
// +kubebuilder:validation:XValidation:rule="!has(self.ceilings) || !has(self.ceilings.writeWindowMultiplier) || !has(self.defaults) || !has(self.defaults.limits) || !has(self.defaults.limits.writeWindow) || !has(self.defaults.limits.writeWindow.multiplier) || self.defaults.limits.writeWindow.multiplier <= self.ceilings.writeWindowMultiplier",message="spec.defaults.limits.writeWindow.multiplier must not exceed spec.ceilings.writeWindowMultiplier",fieldPath=.defaults.limits.writeWindow.multiplier
// +kubebuilder:validation:XValidation:rule="!has(self.ceilings) || !has(self.ceilings.maxFileSize) || !has(self.defaults) || !has(self.defaults.limits) || !has(self.defaults.limits.maxFileSize) || quantity(string(self.defaults.limits.maxFileSize)).compareTo(quantity(string(self.ceilings.maxFileSize))) <= 0",message="spec.defaults.limits.maxFileSize must not exceed spec.ceilings.maxFileSize",fieldPath=.defaults.limits.maxFileSize
// +kubebuilder:validation:XValidation:rule="!has(self.ceilings) || !has(self.ceilings.maxFiles) || !has(self.defaults) || !has(self.defaults.limits) || !has(self.defaults.limits.maxFiles) || self.defaults.limits.maxFiles <= self.ceilings.maxFiles",message="spec.defaults.limits.maxFiles must not exceed spec.ceilings.maxFiles",fieldPath=.defaults.limits.maxFiles
// +kubebuilder:validation:XValidation:rule="!has(self.media.hostPath) || self.backingFilesystems.all(f, !has(f.hostPath) || !(f.hostPath.path == self.media.hostPath.path || f.hostPath.path == '/' || self.media.hostPath.path == '/' || self.media.hostPath.path.startsWith(f.hostPath.path + '/') || f.hostPath.path.startsWith(self.media.hostPath.path + '/')))",message="spec.media.hostPath.path and the hostPath.path of every backing file system must lie apart, neither inside the other: cached data inside the file system it caches would be cached again and shown to jobs, and a file system inside the cache directory would be hidden by it",fieldPath=.media.hostPath.path
type CachePoolSpec struct {
	// nodes selects the nodes that run cache servers. Unset: every node
	// without taints.
	// +optional
	Nodes *NodePlacement `json:"nodes,omitempty"`

	// media is where each node keeps cached data, and how much.
	// +required
	Media CacheMedia `json:"media"`

	// allocationGranularity is the unit in which instances get capacity, such
	// as 256Gi. An instance's capacity is rounded up to a multiple of it, and
	// each unit is served from one node, so larger instances get more servers.
	// Must be greater than zero.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.allocationGranularity must be greater than zero"
	AllocationGranularity resource.Quantity `json:"allocationGranularity"`

	// extentSize is the unit in which files are cached, striped over servers
	// and written back. Defaults to 1Mi. Must be from 4Ki to 1Gi, the
	// extent sizes cache servers start with, and at most half of
	// allocationGranularity, so that each server holds at least 2 extents;
	// a power of two is best.
	// +optional
	// +kubebuilder:default="1Mi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('4Ki')) >= 0 && quantity(string(self)).compareTo(quantity('1Gi')) <= 0",message="spec.extentSize must be from 4Ki to 1Gi, the extent sizes cache servers start with"
	ExtentSize *resource.Quantity `json:"extentSize,omitempty"`

	// backingFilesystems are the file systems that instances of this pool may
	// cache, and who may cache what on them.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	BackingFilesystems []BackingFilesystem `json:"backingFilesystems"`

	// defaults are the settings of instances that leave them unset. They are
	// filled in when an instance is created, and again when an update of its
	// spec (beyond spec.teardown) leaves one unset.
	// +optional
	// +kubebuilder:default={}
	Defaults *InstanceDefaults `json:"defaults,omitempty"`

	// ceilings are the largest settings an instance may ask for. Unset
	// ceilings do not limit.
	// +optional
	Ceilings *InstanceCeilings `json:"ceilings,omitempty"`
}

// NodePlacement selects the nodes of a pool.
type NodePlacement struct {
	// nodeSelector holds labels that a node must have to run cache servers,
	// such as node.burstcache.io/nvme: "true".
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let cache servers run on tainted nodes, such as nodes
	// reserved for I/O.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// CacheMedia is where a pool's nodes keep cached data. Set exactly one of
// hostPath and storageClass.
// +kubebuilder:validation:XValidation:rule="has(self.hostPath) != has(self.storageClass)",message="spec.media must set exactly one of hostPath and storageClass"
type CacheMedia struct {
	// hostPath is a directory on an SSD file system that every node of the
	// pool has mounted at the same path.
	// +optional
	HostPath *HostPathSource `json:"hostPath,omitempty"`

	// storageClass provisions a local persistent volume on each node for its
	// cache server, such as from local-static-provisioner or TopoLVM.
	// +optional
	StorageClass *StorageClassMedia `json:"storageClass,omitempty"`

	// capacityPerNode is how much of each node's media burstcache may use,
	// such as 3Ti. Must be greater than zero.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.media.capacityPerNode must be greater than zero"
	CapacityPerNode resource.Quantity `json:"capacityPerNode"`
}

// HostPathSource is a directory on the nodes.
type HostPathSource struct {
	// path is the directory on the node: absolute and clean.
	// +required
	Path AbsolutePath `json:"path"`
}

// StorageClassMedia is a StorageClass of local persistent volumes.
type StorageClassMedia struct {
	// name is the StorageClass name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// CachePoolStatus is what burstcache observed of a pool.
type CachePoolStatus struct {
	// observedGeneration is the metadata.generation of the spec that the
	// controller last acted on completely.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are the detailed state; Ready says whether the pool can serve
	// instances.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// nodes are the names of the nodes that match the pool.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	Nodes []string `json:"nodes,omitempty"`

	// totalCapacity is the media capacity of all the pool's nodes.
	// +optional
	TotalCapacity *resource.Quantity `json:"totalCapacity,omitempty"`

	// freeCapacity is the part of totalCapacity not allocated to instances.
	// +optional
	FreeCapacity *resource.Quantity `json:"freeCapacity,omitempty"`

	// instances is how many instances are allocated from the pool.
	// +optional
	Instances int32 `json:"instances,omitempty"`
}

// +kubebuilder:object:root=true

// CachePoolList is a list of CachePools.
type CachePoolList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the CachePools.
	Items []CachePool `json:"items"`
}
