// Package ident runs file-system operations under a given identity.
//
// A cache server touches the backing file system only as the identity that
// admins mapped to its instance, or, for a shared server that runs as root, as
// the process that made the request. Linux keeps the identity used for
// file-system permission checks per thread (fsuid, fsgid, the
// supplementary groups and the capabilities), so Do runs the operation on a
// dedicated OS thread whose file-system identity is switched for the
// duration of the call. The thread's effective capabilities among FSCaps
// (CAP_DAC_OVERRIDE, CAP_CHOWN, CAP_FOWNER and friends) become the caller's,
// bounded by those the thread held: root that dropped them all is refused
// what the kernel refuses it, a user granted one is allowed what it allows,
// and the server never gains one it lacks. A Cred whose capabilities are not
// known has what its uid gives, all of them for root and none for anyone
// else, as setfsuid(2) alone would leave the thread. So every permission
// check, parent directories included, is the kernel's own, exactly as if the
// caller touched the backing file system directly.
package ident
