// Package instances creates, finds and deletes the CacheInstances behind
// burstcache CSI volumes. The in-process provisioner and the CSI controller
// service both call it, so that a volume means the same on both paths.
//
// A dynamic volume gets an instance of the claim's namespace named like the
// volume (the PV name), annotated with AnnotationVolume; only such an
// instance is ever deleted for a volume, and its own finalizer writes its
// data back first. A named volume mounts an existing instance of the
// claim's namespace and never deletes it.
//
// Errors wrap ErrInvalid, ErrNotFound, ErrNoCapacity or ErrConflict, which
// callers turn into Events or gRPC codes.
package instances
