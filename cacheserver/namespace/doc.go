// Package namespace defines the file-system namespace that a burstcache mount
// serves: the contract between the FUSE layer and whatever implements the
// files behind it, a striped set of cache servers or a local directory.
//
// Files are named by slash-separated paths relative to the root of the backing
// file system ("a/b/c"; the root itself is ""). The identity of the process
// that makes a call travels in the context (ident.NewContext); an
// implementation runs every backing-store operation as that identity, or as
// the identity its administrator configured, so that permissions hold as if
// the caller used the backing file system directly.
//
// Errors are syscall.Errno values, possibly wrapped: the FUSE layer returns
// the errno found with errors.As to the kernel, and EIO for anything else.
package namespace
