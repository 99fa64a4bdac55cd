package v1alpha1

// Reasons of events that the CSI node plugin records on a CacheInstance,
// and that the operator records on pods.
const (
	// ReasonMountLost means the FUSE daemon of the instance's mount on a
	// node ended without unmounting, so whatever it had not handed to the
	// servers is lost (data of a client cache, a write in flight); the
	// node plugin mounts the instance again. The event names the node and
	// how the daemon ended.
	ReasonMountLost = "MountLost"

	// ReasonInstanceUnavailable is recorded on a pod held at the scheduling
	// gate for an instance that will not become Ready: it is being deleted,
	// or its pool refuses it. The pod stays gated, since it cannot run
	// without the cache; the event says why.
	ReasonInstanceUnavailable = "CacheInstanceUnavailable"

	// ReasonHiddenNamesLeft means that, after the teardown's write-back,
	// some servers could not remove the hidden names (.burstcache-open-*)
	// that files unlinked while open kept because their mount ended
	// before the files' last close. Nothing is lost; the files stay in the
	// backing file system under those names, which the event lists.
	ReasonHiddenNamesLeft = "HiddenNamesLeft"

	// ReasonFilesGivenBack means that the teardown gave files their names
	// back that renames over them had hidden and then failed to replace
	// (a cache server crashed during the rename, and the mount ended
	// before it could give the names back itself); a file whose name
	// another file took meanwhile is kept beside it, under its name
	// followed by .burstcache-kept- and a number. The event lists them.
	ReasonFilesGivenBack = "FilesGivenBack"

	// ReasonNamespaceUnguarded means the operator may not label the
	// instance's namespace as one that holds instances (a policy of the
	// cluster refuses it): the instance goes on, but while the manager is
	// down nothing keeps the namespace from being deleted with its
	// servers before their data is written back.
	ReasonNamespaceUnguarded = "NamespaceUnguarded"
)
