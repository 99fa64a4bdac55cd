// Package controller is the CSI controller service of burstcache, for
// deployments that run the standard external-provisioner sidecar instead of
// the manager's in-process provisioner (package provisioner). Both create
// the same CacheInstances through package instances.
//
// CreateVolume needs the claim's name and namespace: run the sidecar with
// --extra-create-metadata. It reads the claim's annotations itself, since
// the sidecar does not pass them. Its volume's name is the PV name, which
// names the dynamic instance (volume.InstanceName: as is when it is a DNS
// label of at most 47 characters, as the sidecar's pvc-<uid> names are;
// from its hash otherwise), so a StorageClass for the sidecar sets
//
//	csi.storage.k8s.io/node-stage-secret-name: ${pv.name}-secret
//	csi.storage.k8s.io/node-stage-secret-namespace: ${pvc.namespace}
//
// to hand the instance's data Secret to the node plugin. A class of named
// volumes, whose instance is not named like the PV, sets the secret name to
// ${pvc.annotations['csi.burstcache.io/instance']}-secret instead, with
// the instance named by that claim annotation. DeleteVolume deletes a
// dynamic volume's instance and waits, within the caller's deadline, until
// the instance is gone, its data written back; it answers Unavailable if
// the write-back outlasts the call, so that the sidecar keeps the PV and
// asks again. A named volume's instance is never deleted.
//
// gRPC status codes are made at the RPC boundary only, from the sentinel
// errors of package instances.
package controller
