package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CacheType says whether an instance caches a backing path or is scratch
// space of its own.
// +kubebuilder:validation:Enum=cache;scratch
type CacheType string

const (
	// CacheTypeCache is a transparent cache of a backing path: reads copy data
	// up, writes are written back to the same files.
	CacheTypeCache CacheType = "cache"

	// CacheTypeScratch is scratch space with no backing path; its data lives
	// on the cache servers only, and can be staged out at teardown.
	CacheTypeScratch CacheType = "scratch"
)

// AccessMode says how files are spread over an instance's servers.
// +kubebuilder:validation:Enum=Striped;LoadBalanced
type AccessMode string

const (
	// AccessModeStriped stripes every file over all servers in extents, so
	// one file is read and written at the bandwidth of all of them.
	AccessModeStriped AccessMode = "Striped"

	// AccessModeLoadBalanced is read-only: every server holds whole files,
	// and each client reads from one server.
	AccessModeLoadBalanced AccessMode = "LoadBalanced"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cinst,categories=burstcache
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Where the instance is in its life"
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.spec.capacity`,description="Requested cache capacity"
// +kubebuilder:printcolumn:name="Servers",type=integer,JSONPath=`.status.readyServers`,description="Cache servers that are ready"
// +kubebuilder:printcolumn:name="Dirty",type=string,JSONPath=`.status.usage.dirty`,description="Data not yet written back"
// +kubebuilder:printcolumn:name="Hit Ratio",type=string,JSONPath=`.status.usage.hitRatio`,description="Share of reads served from the cache"
// +kubebuilder:printcolumn:name="Backing",type=string,JSONPath=`.spec.backing.path`,description="The cached path"
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`,priority=1
// +kubebuilder:printcolumn:name="Access",type=string,JSONPath=`.spec.accessMode`,priority=1
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 47 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 47 characters of a-z, 0-9 and '-', start with a letter and end with a letter or digit: it names the instance's Service and server pods"

// CacheInstance is an SSD-backed cache that jobs in its namespace mount. Its
// name becomes part of the names of its server objects: the Service
// <name>-servers, a DNS-1035 label, and the server pods <name>-server-<i>,
// whose host names are DNS labels. So it is a DNS-1035 label of at most 47
// characters, the length the CSI driver gives the instances it names. A
// "cache" instance sits in front of a path on a backing file system: pods see
// the same files at the same paths, reads are copied up on demand and writes
// are written back to the same files. No dirty data is dropped when the
// instance is deleted unless spec.teardown says so.
type CacheInstance struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for.
	// +required
	Spec CacheInstanceSpec `json:"spec"`

	// status is what burstcache observed. It is written by the controller.
	// +optional
	Status CacheInstanceStatus `json:"status,omitempty"`
}

// CacheInstanceSpec is the cache a user asks for. Knobs left unset take the
// pool's defaults, and every knob must stay within the pool's ceilings.
// +kubebuilder:validation:XValidation:rule="self.type != 'cache' || has(self.backing)",message="spec.backing is required when spec.type is cache: a cache instance caches a backing path",fieldPath=.backing,reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'scratch' || !has(self.backing)",message="spec.backing must not be set when spec.type is scratch: scratch has no backing path (use spec.stageOut to keep its data)",fieldPath=.backing,reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.accessMode != 'LoadBalanced' || self.type == 'cache'",message="spec.accessMode LoadBalanced needs spec.type cache: it serves read-only copies of a backing path",fieldPath=.accessMode
// +kubebuilder:validation:XValidation:rule="!has(self.stageOut) || self.type == 'scratch'",message="spec.stageOut is only for spec.type scratch: a cache instance writes back to its backing path",fieldPath=.stageOut,reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.preload) || self.type == 'cache'",message="spec.preload needs spec.type cache: it copies up paths under spec.backing.path",fieldPath=.preload,reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.preload) || !has(self.backing) || self.preload.all(p, self.backing.path == '/' || p == self.backing.path || p.startsWith(self.backing.path + '/'))",message="every spec.preload path must be spec.backing.path or a path under it",fieldPath=.preload
// +kubebuilder:validation:XValidation:rule="self.type == 'cache' || !has(self.writeBack) || !has(self.writeBack.durability) || self.writeBack.durability != 'Backing'",message="spec.writeBack.durability Backing needs spec.type cache: scratch has no backing file system",fieldPath=.writeBack.durability
type CacheInstanceSpec struct {
	// type is "cache" (the default), a transparent cache of spec.backing.path,
	// or "scratch", space with no backing path whose data can be staged out
	// with spec.stageOut. This release refuses scratch instances (reason
	// NotSupported). It cannot be changed after creation.
	// +optional
	// +kubebuilder:default=cache
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.type is immutable: create a new instance instead"
	Type CacheType `json:"type,omitempty"`

	// accessMode is "Striped" (the default): each file is cut into extents
	// (1Mi unless the pool sets another size) spread over all servers, for
	// large files and shared-file I/O; or "LoadBalanced" (type cache only):
	// read-only, every server holds whole files and each client reads from
	// one server, for many clients reading the same data set. It cannot be
	// changed after creation.
	// +optional
	// +kubebuilder:default=Striped
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.accessMode is immutable: create a new instance instead"
	AccessMode AccessMode `json:"accessMode,omitempty"`

	// capacity is the SSD space to set aside, a quantity such as 10Ti or
	// 500Gi. It is rounded up to the pool's allocation granularity, and
	// larger instances get more servers (and so more bandwidth). Must be
	// greater than zero. It cannot be changed after creation.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.capacity must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) == 0",message="spec.capacity is immutable: create a new instance instead"
	Capacity resource.Quantity `json:"capacity"`

	// pool is the name of the CachePool to take servers and capacity from.
	// It cannot be changed after creation.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.pool is immutable: create a new instance instead"
	Pool string `json:"pool"`

	// backing is the directory this instance caches: a backing file system of
	// the pool and a path on it. Required for type cache, forbidden for type
	// scratch. It cannot be changed after creation.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.backing is immutable: create a new instance instead"
	Backing *BackingPath `json:"backing,omitempty"`

	// limits bound what the jobs may write. Unset limits take the pool's
	// defaults.
	// +optional
	Limits *Limits `json:"limits,omitempty"`

	// writeBack says when and how dirty data is written back to the backing
	// file system.
	// +optional
	// +kubebuilder:default={}
	WriteBack *WriteBack `json:"writeBack,omitempty"`

	// eviction says when clean data is dropped from the SSDs to make room.
	// +optional
	Eviction *Eviction `json:"eviction,omitempty"`

	// preload lists files and directories (recursively) to copy up before the
	// instance turns Ready, like DataWarp's stage_in. Each is an absolute,
	// clean path: spec.backing.path itself or a path under it. Type cache
	// only. It may change until the preload is done (condition Preloaded);
	// later, copy more up with a preload hint (kubectl burstcache preload).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Preload []AbsolutePath `json:"preload,omitempty"`

	// stageOut copies the data of a scratch instance to a backing file system
	// when the instance is deleted, before its servers go away (DataWarp's
	// stage_out). Type scratch only, which this release refuses.
	// +optional
	StageOut *StageOut `json:"stageOut,omitempty"`

	// teardown says what happens to data not yet written back when the
	// instance is deleted. By default every dirty byte is written back first,
	// however long that takes.
	// +optional
	// +kubebuilder:default={}
	Teardown *Teardown `json:"teardown,omitempty"`

	// runAs is the identity under which the backing file system is read and
	// written: the files the job could touch itself, and only those, can be
	// touched through the cache. The pool must map this identity to the
	// instance's namespace. It cannot be changed after creation.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.uid == oldSelf.uid && self.gid == oldSelf.gid && (has(self.supplementalGroups) ? self.supplementalGroups : []) == (has(oldSelf.supplementalGroups) ? oldSelf.supplementalGroups : [])",message="spec.runAs is immutable: create a new instance instead"
	RunAs RunAs `json:"runAs"`

	// clientCache controls whether the nodes that mount the instance keep
	// its data in their kernels' page caches. Off by default.
	// +optional
	// +kubebuilder:default={}
	ClientCache *ClientCache `json:"clientCache,omitempty"`
}

// +kubebuilder:object:root=true

// CacheInstanceList is a list of CacheInstances.
type CacheInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the CacheInstances.
	Items []CacheInstance `json:"items"`
}
