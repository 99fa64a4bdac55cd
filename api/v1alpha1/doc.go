// Package v1alpha1 holds the cache.burstcache.io/v1alpha1 API: CachePool, which
// an administrator writes to say which nodes hold cache media, which backing
// file systems may be cached and by whom, and what instances get by default;
// and CacheInstance, which a user writes to ask for a cache of a path on a
// backing file system.
//
// The package holds types, their schema markers and constants only. It imports
// the standard library and k8s.io/api and k8s.io/apimachinery, nothing else,
// so that every other package (and other projects) can import it cheaply.
//
// Validation that needs only the object itself lives here, as OpenAPI and CEL
// rules that the API server enforces. Validation that needs other objects (an
// instance against its pool: path prefixes, identities, ceilings) and the
// filling in of pool defaults are done by the webhooks and again by the
// controller.
//
// +kubebuilder:object:generate=true
// +groupName=cache.burstcache.io
package v1alpha1
