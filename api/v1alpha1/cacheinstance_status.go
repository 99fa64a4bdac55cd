package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CacheInstanceStatus is what burstcache observed of an instance.
type CacheInstanceStatus struct {
	// observedGeneration is the metadata.generation of the spec that the
	// controller last acted on completely.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is where the instance is in its life: Pending, Provisioning,
	// Preloading, Ready, Flushing, Deleting or Failed. The conditions say why.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// conditions are the detailed state: Ready, Accepted, ServersReady,
	// Preloaded, ReadOnly, WriteBackFailing, IndexCommitFailing and, during
	// teardown, Flushed.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// servers are the instance's cache servers.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4096
	Servers []ServerStatus `json:"servers,omitempty"`

	// readyServers is how many of the servers are ready.
	// +optional
	ReadyServers int32 `json:"readyServers,omitempty"`

	// usage is what the servers hold and have done, summed over all servers.
	// +optional
	Usage *Usage `json:"usage,omitempty"`

	// neverReady is true for an instance that has not been Ready since it
	// was created. Jobs mount only Ready instances, so nothing was written
	// to it: its teardown does not wait to write back from servers that
	// never started. Instances created before this field existed lack it,
	// and their teardown always writes back.
	// +optional
	NeverReady bool `json:"neverReady,omitempty"`

	// flush is the progress of the write-back at teardown; it is set only
	// while the instance is Flushing.
	// +optional
	Flush *FlushStatus `json:"flush,omitempty"`

	// preload is the progress of copying spec.preload up; it is set only
	// while the preload runs.
	// +optional
	Preload *PreloadStatus `json:"preload,omitempty"`

	// lastRequest is the progress and outcome of the latest user hint asked
	// for with the cache.burstcache.io/request annotation.
	// +optional
	LastRequest *RequestStatus `json:"lastRequest,omitempty"`

	// activeMounts are the pods that mount the instance now. Teardown waits
	// until there are none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=65536
	ActiveMounts []Mount `json:"activeMounts,omitempty"`
}

// ServerStatus is one cache server of an instance.
type ServerStatus struct {
	// name identifies the server within the instance, such as "server-0".
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// pod is the name of the server's pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// node is the node the server runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`

	// endpoint is the address clients reach the server at, host:port.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint,omitempty"`

	// capacity is the SSD space this server holds for the instance.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// ready is true when the server runs and answers.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// dirty is how much data not yet written back the server held when it
	// last answered. It stays while the server does not answer, since the
	// data stays on its SSD, and usage.dirty counts it.
	// +optional
	Dirty *resource.Quantity `json:"dirty,omitempty"`
}

// Usage is what an instance's servers hold and have done, summed over the
// servers that answered the last poll (dirty data also over those that did
// not: what they last reported). Counters (hits, misses, copy-up and
// write-back bytes) count since each server last started: a server that
// restarts, or does not answer, takes its part out of them.
type Usage struct {
	// capacity is the SSD space the servers hold in total; at least
	// spec.capacity.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// cached is how much data the SSDs hold, clean and dirty.
	// +optional
	Cached *resource.Quantity `json:"cached,omitempty"`

	// dirty is how much data the SSDs hold that is not written back yet.
	// +optional
	Dirty *resource.Quantity `json:"dirty,omitempty"`

	// hits counts reads served from the SSDs.
	// +optional
	Hits int64 `json:"hits,omitempty"`

	// misses counts reads that had to copy data up from the backing file
	// system first.
	// +optional
	Misses int64 `json:"misses,omitempty"`

	// hitRatio is hits / (hits + misses) in percent, such as "93.1%".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	HitRatio string `json:"hitRatio,omitempty"`

	// copyUpBytes counts bytes read from the backing file system into the
	// cache.
	// +optional
	CopyUpBytes int64 `json:"copyUpBytes,omitempty"`

	// writeBackBytes counts bytes written back to the backing file system.
	// +optional
	WriteBackBytes int64 `json:"writeBackBytes,omitempty"`

	// copyUpLatency is the mean time one extent took to copy up from the
	// backing file system, such as "4.2ms"; writeBackLatency is the same
	// for writing one back. When first reads or a teardown are slow, they
	// say whether the backing file system is.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	CopyUpLatency string `json:"copyUpLatency,omitempty"`

	// +optional
	// +kubebuilder:validation:MaxLength=32
	WriteBackLatency string `json:"writeBackLatency,omitempty"`

	// windowBytesWritten is how many bytes were written in the current write
	// window; the instance turns read-only when it reaches the window's
	// allowance (spec.limits.writeWindow).
	// +optional
	WindowBytesWritten int64 `json:"windowBytesWritten,omitempty"`

	// writeBackLagSeconds is the age, in seconds, of the oldest dirty data: how
	// far the backing file system is behind the cache.
	// +optional
	WriteBackLagSeconds int64 `json:"writeBackLagSeconds,omitempty"`
}

// FlushStatus is the progress of the write-back at teardown.
type FlushStatus struct {
	// bytesRemaining is how much dirty data is left to write back.
	// +optional
	BytesRemaining int64 `json:"bytesRemaining,omitempty"`

	// startedAt is when the teardown write-back started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// PreloadStatus is the progress of the preload, summed over the servers.
type PreloadStatus struct {
	// bytesDone is how much of the data to preload the servers have copied
	// up (or found cached already).
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`

	// bytesTotal is how much data the servers copy up in all; 0 until they
	// have walked the paths to preload.
	// +optional
	BytesTotal int64 `json:"bytesTotal,omitempty"`

	// startedAt is when the controller started the preload.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// Mount is a pod that mounts an instance, or a node that has it staged
// (its FUSE mount exists) for pods that are not published yet or are gone.
type Mount struct {
	// node is the node the pod runs on, or that has the instance staged.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`

	// pod is the name of the pod, in the instance's namespace; empty for a
	// node that has the instance staged with no pod published.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod,omitempty"`

	// volume is the name of the volume in the pod's spec that mounts the
	// instance.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Volume string `json:"volume,omitempty"`
}
