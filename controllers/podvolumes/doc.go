// Package podvolumes finds the CacheInstances a pod mounts through CSI
// volumes: PVCs and generic ephemeral volumes of burstcache StorageClasses,
// and PVs that name an instance in their volume handle. The pod scheduling
// gate webhook and the CacheInstance reconciler use it to hold such pods
// back until their instances are Ready, as they do for pods labelled with
// an instance.
//
// Volumes of WaitForFirstConsumer classes are left out on purpose: their
// claim is provisioned only once the scheduler picked the pod's node, so a
// pod held back until the instance is Ready would wait for ever. Such a
// pod is scheduled at once, and the node plugin's NodeStageVolume waits
// for the instance instead.
package podvolumes
