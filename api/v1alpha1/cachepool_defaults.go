package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InstanceDefaults are the settings of a pool's instances that leave them
// unset. They are copied into an instance when it is created, so a later
// change of the pool does not change existing instances. An update of an
// instance's spec (beyond spec.teardown) that leaves a write-back, eviction
// or limit setting unset, or takes one out, gets the pool's default of the
// time filled in again; the teardown timeout is filled in at creation only.
type InstanceDefaults struct {
	// writeBack are the defaults of instances' spec.writeBack.
	// +optional
	// +kubebuilder:default={}
	WriteBack *WriteBackDefaults `json:"writeBack,omitempty"`

	// eviction are the defaults of instances' spec.eviction.
	// +optional
	// +kubebuilder:default={}
	Eviction *EvictionDefaults `json:"eviction,omitempty"`

	// limits are the defaults of instances' spec.limits.
	// +optional
	// +kubebuilder:default={}
	Limits *LimitsDefaults `json:"limits,omitempty"`

	// teardown are the defaults of instances' spec.teardown. The policy has
	// no default here: Discard must always be asked for by the user.
	// +optional
	Teardown *TeardownDefaults `json:"teardown,omitempty"`
}

// WriteBackDefaults are the default write-back settings of instances.
// +kubebuilder:validation:XValidation:rule="!has(self.dirtyLowWatermark) || !has(self.dirtyHighWatermark) || self.dirtyLowWatermark < self.dirtyHighWatermark",message="spec.defaults.writeBack.dirtyLowWatermark must be lower than spec.defaults.writeBack.dirtyHighWatermark",fieldPath=.dirtyLowWatermark
type WriteBackDefaults struct {
	// threads is the default number of write-back streams per server, 1 to
	// 64. Defaults to 4.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Threads int32 `json:"threads,omitempty"`

	// dirtyHighWatermark is the default share of capacity, in percent
	// (1-100), that dirty data may fill before write-back starts. Defaults
	// to 60.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DirtyHighWatermark int32 `json:"dirtyHighWatermark,omitempty"`

	// dirtyLowWatermark is the default share of capacity, in percent (1-100,
	// below dirtyHighWatermark), at which write-back stops. Defaults to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DirtyLowWatermark int32 `json:"dirtyLowWatermark,omitempty"`
}

// EvictionDefaults are the default eviction settings of instances.
// +kubebuilder:validation:XValidation:rule="!has(self.lowWatermark) || !has(self.highWatermark) || self.lowWatermark < self.highWatermark",message="spec.defaults.eviction.lowWatermark must be lower than spec.defaults.eviction.highWatermark",fieldPath=.lowWatermark
type EvictionDefaults struct {
	// highWatermark is the default share of capacity, in percent (1-100),
	// that cached data may fill before eviction starts. Defaults to 90.
	// +optional
	// +kubebuilder:default=90
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	HighWatermark int32 `json:"highWatermark,omitempty"`

	// lowWatermark is the default share of capacity, in percent (1-100, below
	// highWatermark), at which eviction stops. Defaults to 80.
	// +optional
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	LowWatermark int32 `json:"lowWatermark,omitempty"`
}

// LimitsDefaults are the default limits of instances.
type LimitsDefaults struct {
	// maxFileSize is the default largest file size. Unset: no limit (but see
	// spec.ceilings.maxFileSize). Must be greater than zero.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.defaults.limits.maxFileSize must be greater than zero"
	MaxFileSize *resource.Quantity `json:"maxFileSize,omitempty"`

	// maxFiles is the default largest number of files. Unset: no limit (but
	// see spec.ceilings.maxFiles). At least 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxFiles *int64 `json:"maxFiles,omitempty"`

	// writeWindow is the default write window.
	// +optional
	// +kubebuilder:default={}
	WriteWindow *WriteWindowDefaults `json:"writeWindow,omitempty"`
}

// WriteWindowDefaults is the default write window of instances.
type WriteWindowDefaults struct {
	// multiplier is the default write window multiplier, 1 to 1000: how many
	// times its capacity an instance may write per window. Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Multiplier int32 `json:"multiplier,omitempty"`

	// length is the default window length, a positive duration. Defaults to
	// 24h.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="spec.defaults.limits.writeWindow.length must be a positive duration such as 24h, 90m or 1h30m"
	Length *metav1.Duration `json:"length,omitempty"`
}

// TeardownDefaults are the default teardown settings of instances.
type TeardownDefaults struct {
	// timeout is the default teardown timeout. Leave it unset (the default)
	// so that teardown waits for write-back however long it takes: with a
	// timeout here, instances that set none lose the data still unwritten
	// when it passes. Because it is copied into each instance at creation,
	// the user sees it in the instance's spec.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="spec.defaults.teardown.timeout must be a positive duration such as 2h, 90m or 1h30m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// InstanceCeilings are the largest settings an instance of the pool may ask
// for; an instance above one is refused. There is no ceiling on the teardown
// timeout: a shorter timeout loses more data, so the pool cannot impose one
// on an instance that did not ask for it.
type InstanceCeilings struct {
	// capacity is the largest capacity of one instance, such as 100Ti.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.ceilings.capacity must be greater than zero"
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// writeBackThreads is the most write-back streams per server, 1 to 64.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	WriteBackThreads *int32 `json:"writeBackThreads,omitempty"`

	// dirtyHighWatermark is the highest dirty high watermark, in percent
	// (1-100): how much of its capacity an instance may fill with data not
	// yet written back before write-back starts.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DirtyHighWatermark *int32 `json:"dirtyHighWatermark,omitempty"`

	// maxFileSize is the largest spec.limits.maxFileSize. Instances that set
	// none, in a pool without a default, get this one.
	// +optional
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.ceilings.maxFileSize must be greater than zero"
	MaxFileSize *resource.Quantity `json:"maxFileSize,omitempty"`

	// maxFiles is the largest spec.limits.maxFiles. Instances that set none,
	// in a pool without a default, get this one.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxFiles *int64 `json:"maxFiles,omitempty"`

	// writeWindowMultiplier is the largest spec.limits.writeWindow.multiplier,
	// 1 to 1000: a bound on SSD wear per window.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	WriteWindowMultiplier *int32 `json:"writeWindowMultiplier,omitempty"`
}
