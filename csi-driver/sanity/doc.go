// Package sanity holds the csi-sanity suite of the whole CSI driver, run as
// a deployment with the standard sidecars runs it: the identity and
// controller services of `burstcache csi controller` on one socket, against
// an API server whose operator turns each CreateVolume into a CacheInstance
// with real server processes; and the identity and node services of
// `burstcache csi node` on another, staging real FUSE mounts of those
// instances. The package has no code of its own outside its tests.
package sanity
