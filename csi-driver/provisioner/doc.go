// Package provisioner provisions burstcache volumes in-process: a
// controller, run by the operator's manager, that follows the contract of
// the CSI external-provisioner sidecar for the PVCs of StorageClasses whose
// provisioner is csi.burstcache.io. Deployments that run the sidecar use
// the CSI controller service (package controller) instead; both create the
// same CacheInstances through package instances.
//
// For a claim it provisions (Immediate binding, or WaitForFirstConsumer once
// the scheduler set the selected-node annotation), it creates the volume's
// CacheInstance and then the PersistentVolume "pvc-<claim UID>", with the
// claim as claimRef, the StorageClass's reclaim policy and mount options,
// the claim's capacity and access modes, and the instance's data Secret as
// nodeStageSecretRef. The PV controller of kube-controller-manager binds
// the two.
//
// A PV it provisions with reclaim policy Delete carries Finalizer. Once its
// claim is gone (the PV is Released) or the PV is deleted, the instance is
// deleted, and only when the instance is gone, its data written back by its
// own finalizer, does the PV go. Retain keeps both. An instance whose claim
// went before its PV was made is deleted too, since no PV ever will.
//
// Bad input is a Warning Event on the claim, which stays Pending.
package provisioner
