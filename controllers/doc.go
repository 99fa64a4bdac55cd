// Package controllers wires the burstcache operator into a controller-runtime
// manager: the CachePool and CacheInstance reconcilers, the CacheInstance
// admission webhooks and the indexes they share. Each part lives in its own
// package; Setup registers them all, so that the manager command and the
// envtest suite run the same operator.
package controllers
