package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AnnotationRequest asks the controller to run a user hint on every server
// of a CacheInstance. Its value is a RequestSpec in JSON, for example
// {"id":"r-1","operation":"flush","path":"results"}. Whoever may patch the
// instance may ask, so namespace RBAC decides; the servers run the hint as
// the instance's runAs identity. The controller runs each id once and
// reports it in status.lastRequest; writing a new id asks again.
const AnnotationRequest = "cache.burstcache.io/request"

// RequestOperation is a user hint about the data under a path.
// +kubebuilder:validation:Enum=flush;evict;invalidate;preload
type RequestOperation string

// User hints, as DataWarp's dwcli offers them.
const (
	// RequestFlush writes back the dirty data under the path (all of it
	// when the path is the instance root).
	RequestFlush RequestOperation = "flush"

	// RequestEvict writes back the dirty data under the path, then drops
	// all its cached data, freeing the space.
	RequestEvict RequestOperation = "evict"

	// RequestInvalidate forgets the clean cached data under the path, so
	// that changes made to the backing file system behind the cache's back
	// are seen. Dirty data stays until it is written back.
	RequestInvalidate RequestOperation = "invalidate"

	// RequestPreload copies the files under the path up from the backing
	// file system.
	RequestPreload RequestOperation = "preload"
)

// RequestSpec is the value of AnnotationRequest.
type RequestSpec struct {
	// id names the request; a new id is a new request.
	ID string `json:"id"`

	// operation is the hint to run.
	Operation RequestOperation `json:"operation"`

	// path is relative to the instance's root (spec.backing.path). It is
	// cleaned and must stay inside the instance: no "..", not absolute.
	// Empty means the whole instance.
	// +optional
	Path string `json:"path,omitempty"`
}

// RequestPhase is where a user hint is.
// +kubebuilder:validation:Enum=Pending;Running;Retrying;Succeeded;Failed
type RequestPhase string

// Phases of a user hint. Succeeded and Failed are final.
const (
	// RequestPending means the request waits for every server to be ready.
	RequestPending RequestPhase = "Pending"

	// RequestRunning means the servers are running the request.
	RequestRunning RequestPhase = "Running"

	// RequestRetrying means an attempt failed for a reason that may pass
	// (a server down, a write-back error); the request runs again with
	// backoff until it succeeds, and the message says what failed last.
	// No dirty data is dropped.
	RequestRetrying RequestPhase = "Retrying"

	// RequestSucceeded means every server ran the request.
	RequestSucceeded RequestPhase = "Succeeded"

	// RequestFailed means the request cannot succeed as written: it is
	// malformed, its path leaves the instance, or the path is missing or
	// not readable by runAs. Write a new id to ask again.
	RequestFailed RequestPhase = "Failed"
)

// RequestStatus is the progress and outcome of the latest user hint.
type RequestStatus struct {
	// id is the request's id, as in the annotation.
	// +kubebuilder:validation:MaxLength=253
	ID string `json:"id"`

	// operation is the hint being run.
	// +optional
	Operation RequestOperation `json:"operation,omitempty"`

	// path is the cleaned path, relative to the instance's root.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path,omitempty"`

	// phase is where the request is.
	Phase RequestPhase `json:"phase"`

	// bytesRemaining is the dirty data left, for a flush of the whole
	// instance.
	// +optional
	BytesRemaining int64 `json:"bytesRemaining,omitempty"`

	// bytesDone is how much a preload has copied up so far, summed over
	// the servers; once it succeeded, all it copied up.
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`

	// bytesTotal is how much a preload copies up in all, summed over the
	// servers; 0 until the servers have walked the path.
	// +optional
	BytesTotal int64 `json:"bytesTotal,omitempty"`

	// attempts counts the attempts that ended in failure.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// message says what failed, or what the request waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`

	// startedAt is when the controller first saw the request.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`

	// completedAt is when the request reached a final phase.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
}

// Event reasons of user hints.
const (
	// ReasonRequestRunning means the servers started a user hint.
	ReasonRequestRunning = "RequestRunning"

	// ReasonRequestSucceeded means every server ran a user hint.
	ReasonRequestSucceeded = "RequestSucceeded"

	// ReasonRequestRetrying means an attempt at a user hint failed and will
	// be retried with backoff.
	ReasonRequestRetrying = "RequestRetrying"

	// ReasonRequestFailed means a user hint cannot succeed as written.
	ReasonRequestFailed = "RequestFailed"
)
