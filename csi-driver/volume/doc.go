// Package volume is what the CSI driver's controller and node sides agree a
// burstcache volume is: its ID names a CacheInstance, and its context keys
// say how the node publishes it.
package volume
