package v1alpha1

// Finalizer holds a CacheInstance after deletion until every mount is gone
// and every dirty byte is written back (or the user chose Discard or a
// timeout). Only the controller removes it.
const Finalizer = "cache.burstcache.io/teardown"

// ServerProtectionFinalizer is set on every server pod so that neither the
// garbage collector nor a user's delete removes it before the instance's
// teardown write-back ends. Only the controller removes it.
const ServerProtectionFinalizer = "cache.burstcache.io/server-protection"

// Labels and annotations that burstcache puts on the objects it creates or
// reads from the objects users write.
const (
	// LabelInstance is set on every object made for a CacheInstance (server
	// pods, StatefulSets, Services); its value is the instance's name.
	LabelInstance = "cache.burstcache.io/instance"

	// LabelPool is set on every object made for a CacheInstance; its value is
	// the name of the CachePool the instance was allocated from.
	LabelPool = "cache.burstcache.io/pool"

	// LabelComponent says which part of burstcache an object belongs to; its
	// values are the Component constants.
	LabelComponent = "cache.burstcache.io/component"

	// ComponentServer is the LabelComponent value of cache server pods.
	ComponentServer = "server"

	// LabelServerIndex is set on server pods; its value is the server's index
	// in the instance, from 0.
	LabelServerIndex = "cache.burstcache.io/server-index"

	// LabelHoldsInstances is set, to "true", on a namespace before the
	// first object of a CacheInstance in it is made, and stays: the guard
	// of namespace deletion refuses to delete such a namespace while the
	// manager does not answer, where it lets others go.
	LabelHoldsInstances = "cache.burstcache.io/holds-instances"

	// AnnotationControlProtocol is set by the manager on every server pod
	// it creates; its value is the version of the control API protocol
	// that the pod's server speaks ("4" for servers that take only calls
	// signed for them and sign their answers so; "3" for those of the
	// release before, whose signatures name no server). The manager calls
	// each server as its pod says, never as an answer at the pod's address
	// says: a pod without it was made by a manager of an earlier release,
	// whose servers sign calls but not answers ("2"); an admin sets "1" on
	// a pod whose server is of the first release, which takes only a fixed
	// bearer token.
	AnnotationControlProtocol = "cache.burstcache.io/control-protocol"

	// AnnotationDirective holds DataWarp directives, one per line (for
	// example "#DW jobdw type=cache access_mode=striped pfs=/lus/global
	// capacity=100TiB"), on a pod; burstcache translates them into
	// CacheInstances and volumes.
	AnnotationDirective = "burstcache.io/dw"

	// AnnotationDirectiveAlias is the earlier name of AnnotationDirective,
	// still read. A pod that carries both is refused unless they agree.
	AnnotationDirectiveAlias = "cache.burstcache.io/directive"

	// AnnotationTeardownRecord is set on a CacheInstance when its teardown
	// went past unwritten data (policy Discard or an expired timeout); its
	// value says what was dropped and why, so that the decision stays on
	// record.
	AnnotationTeardownRecord = "cache.burstcache.io/teardown-record"

	// SchedulingGate holds pods that use a CacheInstance back from scheduling
	// until the instance is Ready.
	SchedulingGate = "cache.burstcache.io/cache-ready"
)

// Condition types of a CacheInstance. Each is a metav1.Condition type in
// status.conditions.
const (
	// ConditionReady is True when the instance can be mounted: it was
	// accepted, all its servers are ready and the preload finished.
	ConditionReady = "Ready"

	// ConditionAccepted is True when the instance passed the checks against
	// its pool: the pool exists, the backing path is under a prefix that the
	// pool grants to the namespace, runAs is an identity the pool maps to the
	// namespace, and every knob is within the pool's ceilings.
	ConditionAccepted = "Accepted"

	// ConditionServersReady is True when every cache server of the instance
	// runs and answers.
	ConditionServersReady = "ServersReady"

	// ConditionPreloaded is True when every path in spec.preload was copied
	// up (or there is nothing to preload).
	ConditionPreloaded = "Preloaded"

	// ConditionReadOnly is True when the instance refuses writes: with
	// EROFS because more bytes were written in the current write window
	// than the window allows, or with EIO because the cache device of a
	// server failed.
	ConditionReadOnly = "ReadOnly"

	// ConditionWriteBackFailing is True while write-back to the backing
	// file system keeps failing on some server: the dirty data stays cached
	// and is retried with backoff.
	ConditionWriteBackFailing = "WriteBackFailing"

	// ConditionIndexCommitFailing is True while a server cannot commit its
	// cache index, as when the disk of its cache directory is full: fsync
	// fails, and so do writes that need cache space freed since; nothing
	// is lost, and the server retries.
	ConditionIndexCommitFailing = "IndexCommitFailing"

	// ConditionServersOutdated is True while some server pods run with
	// another image, pull policy, pull secrets or arguments than the
	// manager makes them now (made by an earlier release of the manager,
	// or before a change of the pool that the arguments follow). They are
	// replaced only when deleted: each comes back on its node and recovers
	// the data of its cache directory. Knobs that reach running servers
	// live do not count.
	ConditionServersOutdated = "ServersOutdated"

	// ConditionFlushed is set during teardown: True when no dirty data is
	// left on any server, False with the reason while write-back goes on or
	// fails.
	ConditionFlushed = "Flushed"
)

// Condition types of a CachePool.
const (
	// ConditionPoolReady is True when at least one node matches the pool and
	// its cache media is usable.
	ConditionPoolReady = "Ready"
)

// Condition reasons. They are PascalCase, as metav1.Condition requires, and
// are also used as Event reasons.
const (
	// ReasonAsExpected is the reason of a condition that is in its good state.
	ReasonAsExpected = "AsExpected"

	// ReasonPoolNotFound means spec.pool names no CachePool.
	ReasonPoolNotFound = "PoolNotFound"

	// ReasonFilesystemNotFound means spec.backing.filesystem names no backing
	// file system of the pool.
	ReasonFilesystemNotFound = "FilesystemNotFound"

	// ReasonPathNotAllowed means no access rule of the backing file system
	// grants the backing path to the instance's namespace.
	ReasonPathNotAllowed = "PathNotAllowed"

	// ReasonIdentityNotAllowed means spec.runAs is not an identity that the
	// pool maps to the instance's namespace for the backing path.
	ReasonIdentityNotAllowed = "IdentityNotAllowed"

	// ReasonExceedsCeiling means a knob of the instance is above the pool's
	// ceiling for it.
	ReasonExceedsCeiling = "ExceedsCeiling"

	// ReasonInsufficientCapacity means the pool has too little free capacity
	// on suitable nodes for the instance; it stays Pending.
	ReasonInsufficientCapacity = "InsufficientCapacity"

	// ReasonProvisioning means servers were created and are starting.
	ReasonProvisioning = "Provisioning"

	// ReasonServersNotReady means some servers do not run or do not answer.
	ReasonServersNotReady = "ServersNotReady"

	// ReasonPreloading means the preload is in progress.
	ReasonPreloading = "Preloading"

	// ReasonPreloadFailed means a preload path could not be copied up (it is
	// missing, or runAs may not read it).
	ReasonPreloadFailed = "PreloadFailed"

	// ReasonCacheDeviceFailed means an fdatasync of a server's cache device
	// failed: the server refuses writes (EIO) and makes nothing durable on
	// the device, but serves reads and writes back what is dirty.
	ReasonCacheDeviceFailed = "CacheDeviceFailed"

	// ReasonWriteBackRefused means the backing file system refuses the
	// write-back of a server's dirty data: it is full, over quota or
	// read-only. Writes that need cache space held by dirty data fail with
	// its error, as they would on it directly.
	ReasonWriteBackRefused = "WriteBackRefused"

	// ReasonWriteBackErrors means write-back to the backing file system
	// keeps failing on a server for another reason; the message has the
	// latest error.
	ReasonWriteBackErrors = "WriteBackErrors"

	// ReasonIndexCommitErrors means a server's commits of its cache index
	// fail; the message names the server and the error.
	ReasonIndexCommitErrors = "IndexCommitErrors"

	// ReasonPodsOutdated means some server pods differ from the pods the
	// manager makes now; the message names them and how.
	ReasonPodsOutdated = "PodsOutdated"

	// ReasonPreloadStarted is the reason of the Event recorded when the
	// servers start copying spec.preload up.
	ReasonPreloadStarted = "PreloadStarted"

	// ReasonPreloadRetrying means an attempt at the preload failed for a
	// reason that may pass (a server down or slow); it runs again with
	// backoff, and the message says what failed.
	ReasonPreloadRetrying = "PreloadRetrying"

	// ReasonPreloadSucceeded is the reason of the Event recorded when every
	// path of spec.preload was copied up.
	ReasonPreloadSucceeded = "PreloadSucceeded"

	// ReasonWriteWindowExceeded means the instance turned read-only because
	// of its write window.
	ReasonWriteWindowExceeded = "WriteWindowExceeded"

	// ReasonWaitingForUnmount means teardown waits for pods that still mount
	// the instance.
	ReasonWaitingForUnmount = "WaitingForUnmount"

	// ReasonFlushing means teardown is writing dirty data back.
	ReasonFlushing = "Flushing"

	// ReasonFlushFailed means a write-back attempt failed; it is retried with
	// backoff, and the message says what failed.
	ReasonFlushFailed = "FlushFailed"

	// ReasonFlushTimedOut means spec.teardown.timeout passed with dirty data
	// left; the data was dropped and the teardown recorded.
	ReasonFlushTimedOut = "FlushTimedOut"

	// ReasonDiscarded means dirty data was dropped because spec.teardown.policy
	// is Discard.
	ReasonDiscarded = "Discarded"

	// ReasonNeverReady means the teardown had nothing to write back: the
	// instance was never Ready, so no job wrote to it, and some of its
	// servers never started.
	ReasonNeverReady = "NeverReady"

	// ReasonNoNodes means no node matches the pool's node selector and
	// tolerations.
	ReasonNoNodes = "NoNodes"

	// ReasonMediaUnavailable means the pool's cache media (host path or
	// StorageClass) is missing or unusable, or the pool's sizes do not fit
	// it: units that no node holds, or extents its servers do not start
	// with.
	ReasonMediaUnavailable = "MediaUnavailable"

	// ReasonNotSupported means the instance asks for something this version
	// of burstcache cannot do safely, such as spec.type scratch.
	ReasonNotSupported = "NotSupported"
)

// Phase is the coarse state of a CacheInstance, shown by kubectl get. The
// conditions say why an instance is in its phase.
// +kubebuilder:validation:Enum=Pending;Provisioning;Preloading;Ready;Flushing;Deleting;Failed
type Phase string

// Phases of a CacheInstance, in the order an instance normally goes through
// them.
const (
	// PhasePending means the instance was not accepted yet, or waits for
	// capacity.
	PhasePending Phase = "Pending"

	// PhaseProvisioning means servers are being created and started.
	PhaseProvisioning Phase = "Provisioning"

	// PhasePreloading means servers are up and spec.preload is being copied
	// up.
	PhasePreloading Phase = "Preloading"

	// PhaseReady means the instance can be mounted.
	PhaseReady Phase = "Ready"

	// PhaseFlushing means the instance is being deleted and dirty data is
	// being written back (or staged out). An instance stays here, with the
	// reason in its conditions, for as long as write-back cannot finish.
	PhaseFlushing Phase = "Flushing"

	// PhaseDeleting means no dirty data is left and the servers are being
	// removed.
	PhaseDeleting Phase = "Deleting"

	// PhaseFailed means the instance cannot be provisioned as written (for
	// example its pool refuses it); the conditions say why. Fix the spec or
	// delete it.
	PhaseFailed Phase = "Failed"
)
