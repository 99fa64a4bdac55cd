// Package ident runs file-system operations under a given identity.
//
// A cache server touches the backing file system only as the identity that
// admins mapped to its instance, or, for a shared server that runs as root, as
// the process that made the request. Linux keeps the identity used for
// file-system permission checks per thread (fsuid, fsgid and the
// supplementary groups), so Do runs the operation on a dedicated OS thread
// whose file-system identity is switched for the duration of the call. When
// fsuid changes away from 0 the kernel drops the file-system capabilities
// (CAP_DAC_OVERRIDE and friends), so every permission check, parent
// directories included, is the kernel's own, exactly as if the caller touched
// the backing file system directly.
package ident
