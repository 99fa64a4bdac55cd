// Package driver serves burstcache's CSI driver, csi.burstcache.io: the
// identity and node services, and a controller service given to it.
//
// A volume ID is <namespace>/<cacheinstance> (package volume). The node
// service stages a volume as one FUSE mount (`burstcache mount`) of the
// instance per node, at the staging path, and publishes it into pods with
// bind mounts of the staging path or of volume_context["subPath"] below
// it.
//
// # Read-only
//
// A publish is read-only when the request says readonly or the access mode
// is a reader-only one: the bind mount is remounted read-only, so writes
// through it fail with EROFS, while other publications of the same staged
// mount may write. A LoadBalanced instance is read-only as a whole: its
// mount refuses every write.
//
// # What survives what
//
// The FUSE daemons are started by a mounter.Mounter so that they do not end
// with the plugin: detached processes (mounter.Process) or mount pods
// (mounter.Pod). Everything the plugin knows of a volume is on disk, in
// <StateDir>/volumes/<namespace>_<instance>/:
//
//   - state.json: the volume ID, the mount (servers, extent size, staging
//     path) and its publications (target, sub-path, read-only, pod),
//     written atomically before each change takes effect;
//   - secret: the data-path shared secret, mode 0600;
//   - the mounter's files (ready.json, exit.json, mount.log).
//
// A new plugin over the same StateDir therefore takes over the mounts of
// an old one: its watcher lists the recorded volumes at start, checks that
// each daemon runs and its mount answers, and after that every interval.
// A daemon that has ended is replaced: its dead mount and the dead binds
// are detached, a new daemon mounts the staging path, and the targets are
// bound again. Meanwhile NodeGetVolumeStats reports the volume's condition
// as abnormal. Containers that had the old bind mount keep a dead view
// unless their volume mount propagates from the host.
//
// # Release and teardown
//
// While a volume is staged, the plugin holds a mount Lease in the
// instance's namespace (volume.MountLeaseName), listing the published pods
// in cachev1alpha1.AnnotationMountPods; the operator's teardown waits for
// it. NodeUnstageVolume sends the daemon SIGTERM, waits until it has
// unmounted and published what it wrote, and deletes the Lease only when
// the daemon's exit record says it published everything. A daemon that
// failed, was killed during unstage, or does not end in time leaves the
// Lease in place, and the call fails and is retried: the plugin never
// detaches a mount that may hold unpublished data. An admin who accepts
// the loss deletes the Lease.
//
// # The secret
//
// The shared secret that proves a mount to the instance's servers reaches
// the plugin only through NodeStageVolume's secrets (kubelet reads the
// PersistentVolume's nodeStageSecretRef), is logged by nobody (the logging
// interceptor strips secrets), and is handed to the daemon as a root-only
// file, never in argv, the environment or a volume context.
//
// # Errors
//
// Inside the package, errors are Go errors wrapping the sentinels of
// errors.go; one interceptor turns them into gRPC status codes. Calls for a
// volume that another call is working on fail at once with Aborted.
package driver
