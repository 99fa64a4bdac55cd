package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits bound what the jobs using an instance may write. A limit left unset
// takes the pool's default; a limit may not exceed the pool's ceiling.
type Limits struct {
	// maxFileSize is the largest size a file may grow to through the cache,
	// such as 1Ti; a write past it fails with EFBIG. Must be greater than
	// zero. Unset: the pool's default, or no limit if the pool has none.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.limits.maxFileSize must be greater than zero"
	MaxFileSize *resource.Quantity `json:"maxFileSize,omitempty"`

	// maxFiles is how many files the jobs may create through the cache; a
	// create past it fails with EDQUOT, and so does an open for writing of
	// a file of the backing path the cache does not hold. The servers share
	// it, each admitting its part (maxFiles / servers) of the files whose
	// metadata it keeps, so a create may fail before the instance holds
	// maxFiles files. At least 1. Unset: the pool's default, or no limit if
	// the pool has none.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxFiles *int64 `json:"maxFiles,omitempty"`

	// writeWindow limits how much may be written in a period, to protect the
	// SSDs from wear. Past it the instance turns read-only (writes fail with
	// EROFS) until the window moves on.
	// +optional
	WriteWindow *WriteWindow `json:"writeWindow,omitempty"`
}

// WriteWindow allows multiplier x capacity bytes to be written in any period
// of the given length.
type WriteWindow struct {
	// multiplier times the instance's capacity is how many bytes may be
	// written per window, 1 to 1000. Unset: the pool's default, which is 10
	// unless the administrator changed it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Multiplier *int32 `json:"multiplier,omitempty"`

	// length is the length of the window, a positive duration such as 24h or
	// 90m. Unset: the pool's default, which is 24h unless the administrator
	// changed it.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="spec.limits.writeWindow.length must be a positive duration such as 24h, 90m or 1h30m"
	Length *metav1.Duration `json:"length,omitempty"`
}

// Durability says where data must be when a job's fsync or close returns.
// +kubebuilder:validation:Enum=Cache;Backing
type Durability string

const (
	// DurabilityCache means fsync and close return once the data is on the
	// cache servers' SSDs. It is written back later; the names that calls
	// through the cache made, moved or removed are made durable on the
	// backing file system by a flush and at teardown.
	DurabilityCache Durability = "Cache"

	// DurabilityBacking means fsync and close return only once the data is
	// written back to the backing file system, and with it the file's name
	// (its directory and those above it); a create, mkdir, link, symlink or
	// rename returns once the names it made are durable there. Slower, but
	// a job whose fsync returned knows its data is on the backing file
	// system.
	DurabilityBacking Durability = "Backing"
)

// WriteBack says when and how dirty data (written to the cache but not yet to
// the backing file system) is written back. Write-back starts when dirty data
// passes the high watermark and runs until it is below the low watermark; it
// always runs to the end at teardown.
// +kubebuilder:validation:XValidation:rule="has(self.dirtyHighWatermark) == has(self.dirtyLowWatermark)",message="spec.writeBack.dirtyHighWatermark and spec.writeBack.dirtyLowWatermark must be set together",fieldPath=.dirtyLowWatermark
// +kubebuilder:validation:XValidation:rule="!has(self.dirtyHighWatermark) || !has(self.dirtyLowWatermark) || self.dirtyLowWatermark < self.dirtyHighWatermark",message="spec.writeBack.dirtyLowWatermark must be lower than spec.writeBack.dirtyHighWatermark",fieldPath=.dirtyLowWatermark
type WriteBack struct {
	// threads is how many write-back streams each server runs, 1 to 64.
	// Unset: the pool's default, which is 4 unless the administrator changed
	// it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Threads *int32 `json:"threads,omitempty"`

	// dirtyHighWatermark is the share of capacity, in percent (1-100), that
	// dirty data may fill before write-back starts. Set it together with
	// dirtyLowWatermark. Unset: the pool's default, which is 60 unless the
	// administrator changed it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DirtyHighWatermark *int32 `json:"dirtyHighWatermark,omitempty"`

	// dirtyLowWatermark is the share of capacity, in percent (1-100, below
	// dirtyHighWatermark), at which write-back stops. Unset: the pool's
	// default, which is 30 unless the administrator changed it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DirtyLowWatermark *int32 `json:"dirtyLowWatermark,omitempty"`

	// durability is "Cache" (the default): fsync and close return once data
	// is on the cache SSDs; or "Backing" (type cache only): they return only
	// once the data is written back to the backing file system. It cannot be
	// changed after creation: each server takes it when it starts.
	// +optional
	// +kubebuilder:default=Cache
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.writeBack.durability is immutable: the servers took it when they started; create a new instance instead"
	Durability Durability `json:"durability,omitempty"`
}

// Eviction says when clean data (data the backing file system also holds) is
// dropped from the SSDs, least recently used first. Eviction starts when the
// cache is fuller than the high watermark and runs until it is below the low
// one. Dirty data is never evicted: it is written back first.
// +kubebuilder:validation:XValidation:rule="has(self.highWatermark) == has(self.lowWatermark)",message="spec.eviction.highWatermark and spec.eviction.lowWatermark must be set together",fieldPath=.lowWatermark
// +kubebuilder:validation:XValidation:rule="!has(self.highWatermark) || !has(self.lowWatermark) || self.lowWatermark < self.highWatermark",message="spec.eviction.lowWatermark must be lower than spec.eviction.highWatermark",fieldPath=.lowWatermark
type Eviction struct {
	// highWatermark is the share of capacity, in percent (1-100), that cached
	// data may fill before eviction starts. Set it together with
	// lowWatermark. Unset: the pool's default, which is 90 unless the
	// administrator changed it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	HighWatermark *int32 `json:"highWatermark,omitempty"`

	// lowWatermark is the share of capacity, in percent (1-100, below
	// highWatermark), at which eviction stops. Unset: the pool's default,
	// which is 80 unless the administrator changed it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	LowWatermark *int32 `json:"lowWatermark,omitempty"`
}

// StageOut copies a scratch instance's data out when it is deleted.
type StageOut struct {
	// destination is the directory on a backing file system that receives the
	// instance's files (its root becomes this directory). The pool must grant
	// it to the namespace, and it is written as spec.runAs.
	// +required
	Destination BackingPath `json:"destination"`
}

// TeardownPolicy says what happens to unwritten data when an instance is
// deleted.
// +kubebuilder:validation:Enum=WriteBack;Discard
type TeardownPolicy string

const (
	// TeardownWriteBack writes every dirty byte back (or stages a scratch
	// instance out) before the servers are removed.
	TeardownWriteBack TeardownPolicy = "WriteBack"

	// TeardownDiscard drops data that was not written back yet. It is never a
	// default: a user must write it.
	TeardownDiscard TeardownPolicy = "Discard"
)

// Teardown says what happens to unwritten data when an instance is deleted.
// Deletion always waits until no pod mounts the instance any more.
type Teardown struct {
	// policy is "WriteBack" (the default): every dirty byte is written back,
	// or a scratch instance staged out, before the servers are removed,
	// retrying failures for as long as it takes (or until timeout); or
	// "Discard": unwritten data is dropped. Discard is never a default; you
	// must write it. It may be changed at any time, also while a deleted
	// instance is Flushing.
	// +optional
	// +kubebuilder:default=WriteBack
	Policy TeardownPolicy `json:"policy,omitempty"`

	// timeout bounds how long write-back may take at teardown, a positive
	// duration such as 2h. When it passes, the data still unwritten is
	// dropped and the loss is recorded in the instance's conditions and
	// events. Unset: the pool's default, which is no timeout unless the
	// administrator set one.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="spec.teardown.timeout must be a positive duration such as 2h, 90m or 1h30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RunAs is a POSIX identity on the backing file system.
type RunAs struct {
	// uid is the user ID, 0 to 4294967294. 0 (root) is only accepted if the
	// pool allows root for the namespace.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967294
	UID int64 `json:"uid"`

	// gid is the primary group ID, 0 to 4294967294.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967294
	GID int64 `json:"gid"`

	// supplementalGroups are further group IDs, each 0 to 4294967294 and
	// allowed by the pool for the namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=4294967294
	SupplementalGroups []int64 `json:"supplementalGroups,omitempty"`
}

// ClientCache controls caching in the kernels of the nodes that mount an
// instance.
type ClientCache struct {
	// enabled lets each mounting node keep file data and attributes in its
	// page cache. Re-reads get faster, but a pod may then see data that pods
	// on other nodes have since overwritten until it reopens the file.
	// Defaults to false: every read and write goes to the cache servers.
	// +optional
	// +kubebuilder:default=false
	Enabled bool `json:"enabled,omitempty"`
}
