// Package control is the control API of a burstcache cache server: the
// request and response types, the HTTP handler a server mounts, and the
// typed Client that the operator, the CSI driver and the command line use.
//
// It is the only package under cacheserver/ that code outside it may
// import, and it imports nothing of the server: the server implements
// Service. It also makes and reads mount keys (NewMountKey), which the
// operator gives the servers and mounts of shared instances.
//
// The API is HTTP with JSON bodies on the server's control address:
//
//	POST /v1/flush               write back every dirty byte; FlushResult
//	POST /v1/drain               refuse new writes (EROFS), then flush; FlushResult
//	POST /v1/discard             refuse new writes, and remove the cache files,
//	                             dirty data included, when the server stops
//	POST /v1/hidden/remove       remove the hidden names of files unlinked while
//	                             open that dead mounts left; HiddenResult
//	POST /v1/paths/flush         write back one path; body PathRequest
//	POST /v1/paths/evict         drop the clean cached data of a path
//	POST /v1/paths/invalidate    forget a path's clean data, to see out-of-band
//	                             changes; returns once the mounts dropped theirs
//	POST /v1/paths/preload       copy a path up from the backing store
//	GET  /v1/stats               Stats
//	PUT  /v1/tunables            change Tunables live
//	GET  /healthz                200 while the process runs
//	GET  /readyz                 200 while the server serves the data path
//
// A path in a body is relative to the backing directory and goes byte for
// byte: a JSON string when it is valid UTF-8, else {"base64": "..."} of its
// bytes (see Path), which servers of earlier releases refuse (400, EINVAL)
// rather than act on the path with U+FFFD in place of the other bytes.
//
// A server with a shared secret (every server of an instance has one)
// serves only calls signed with it, one by one (see authScheme): an HMAC
// under the secret of the method, the path, a digest of the body, the time,
// a nonce, and the server the call is meant for, named by its index in the
// instance (HandlerConfig.Index). Every server of an instance holds the
// same secret, so a server refuses a call signed for another: a call seen
// on its way to one server cannot be sent to the others. Others get 401
// with EACCES and the reason. The server
// refuses a signature it served before, one more than five minutes from its
// clock, and one made more than five seconds before it started, so a call
// seen on the network cannot be sent again, nor made into another. A server
// whose handler has a file of calls served (HandlerConfig.ServedCalls), as
// every cache server keeps in its cache directory, records each call that
// changes something there, fsynced, before it serves it, and refuses those
// calls after a restart too; one without it serves again, after a restart,
// the calls signed in the seconds before it, and those of a caller whose
// clock runs ahead. The file has room for the calls of the last minutes
// from the start and records each in place, so a full disk does not stop
// them; a call that cannot be recorded (a failed disk, or more calls than
// the file holds when it cannot grow) is not served: 503 with EIO. The
// probes /healthz and /readyz are open to all. Without the check, anyone
// who reaches the control port could drain an instance, mark its dirty
// data for discarding, or change its knobs.
//
// The server signs its answer to each signed call in turn (see
// answerHeader): an HMAC under the secret of the call's method, path, time
// and nonce, the answer's status and a digest of its body; its refusal of
// a call whose signature was right but that came too late or again too.
// The client takes no answer without that signature: it returns an error
// matching ErrUnsignedAnswer and takes nothing of the answer, so that
// whatever answers at a server's address (a pod that got a dead server's
// IP, anyone on the path) can neither make a drain look done nor a server
// look clean while its dirty data waits on the server's disk, and cannot
// pass off the answer to one call as that to another. A refusal to a caller
// of another secret cannot be signed for it, and so is such an error too.
// The probes' answers are not signed.
//
// Servers of the release before this one take calls that name no server
// and sign answers that name none (ProtocolSigned), those of the release
// before that sign no answers (ProtocolSignedCalls), and those of the
// first release take only a fixed bearer token that anyone who sees it go
// by can send them again (ProtocolBearer). A client speaks the Protocol it
// is made with (NewClientFor) and never changes it on the word of an
// answer: a refusal that asks for no signature, or for a call that names
// no server, is an error like any other, not a reason to sign less. The
// caller must know a server's protocol, and its index, from a source it
// trusts; the operator reads them from the server's pod, `burstcache
// local` from its state. A client of an earlier protocol believes whatever
// answers at the server's address, or any server of the instance, as
// clients of those releases did.
//
// During an upgrade, a client of this release calls a server of the
// release before as ProtocolSigned when its pod says so; told
// ProtocolAddressed, it gets that server's refusal, unsigned, and takes
// nothing of it (ErrUnsignedAnswer), since that server checks the
// signature of a call that names none. A server of this release serves
// the calls that name no server, of callers of earlier releases, unless
// it was told to refuse them (HandlerConfig.RefuseUnaddressed), as the
// operator tells the servers of the pods it makes, which it calls with
// ProtocolAddressed; it then refuses them with a signed answer that says
// why. A server that serves them can be sent, by whoever saw it, such a
// call meant for another server of its instance; servers that `burstcache
// local` starts serve them, since their calls cross only the loopback.
//
// A failed call answers a non-2xx status with an ErrorBody; the client
// returns it as an *Error that matches its errno with errors.Is.
package control
