// Package placement says which cache server holds what in a striped
// instance of N servers.
//
// Extent e of file f (bytes [e*ExtentSize, (e+1)*ExtentSize)) lives on server
// (hash(f) + e) mod N, so a file's extents go round the servers starting at
// a place that depends on its name, and many small files spread evenly.
// Metadata operations on a path go to server hash(path) mod N. The hash is
// FNV-1a 64 of the path as the namespace names it ("a/b/c"); it is part of
// the on-disk contract of an instance, since a server's cache holds the
// extents placement gave it: never change it for an existing instance.
package placement
