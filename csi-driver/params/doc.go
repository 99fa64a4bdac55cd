// Package params defines the StorageClass parameters and PVC annotations
// that describe a burstcache volume, and parses them into the CacheInstance
// a dynamic volume gets or the existing instance a named volume mounts. The
// in-process provisioner and the CSI controller service both parse with
// it, so that the two provisioning paths accept exactly the same input.
//
// Every key is a StorageClass parameter; all but Pool may also be set on a
// PVC as an annotation with the AnnotationPrefix, which overrides the
// StorageClass. The pool is the admin's choice alone. Keys a CSI sidecar
// adds (prefix csi.storage.k8s.io/) are ignored; any other unknown key is
// an error, so that a typo never silently yields a cache the user did not
// ask for.
//
// runAs keys are accepted, but they are only a request: the pool's access
// rules decide whether the namespace may use that identity, exactly as for
// a CacheInstance written by hand.
package params
