// Package cachepool reconciles CachePools: it finds the nodes that match a
// pool, reports in status its nodes, total and free capacity and the
// instances placed on it, and says in the Ready condition why a pool cannot
// serve (no nodes, media it cannot use such as a StorageClass that does
// not exist, or backing file systems it cannot use).
package cachepool
