// Package plugin is the logic of the kubectl-burstcache plugin: its
// commands, how it reaches the cluster (the standard kubeconfig flags, read
// with client-go's clientcmd), its tables and its progress lines.
//
// Hints never reach cache servers directly: the plugin writes the
// cache.burstcache.io/request annotation on the CacheInstance, so that the
// API server's RBAC decides who may ask, and follows status.lastRequest,
// which the operator fills in as the servers run the hint.
package plugin
