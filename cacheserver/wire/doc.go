// Package wire is the data-path protocol between burstcache clients and cache
// servers: length-framed requests and responses over TCP, several requests in
// flight per connection, answered in any order.
//
// # Transport
//
// A server address is a TCP address, or the absolute path of a Unix domain
// socket, which servers and clients on one machine use: it spares the TCP
// stack, about a third of the CPU a call costs over loopback. The protocol
// is the same on both.
//
// # Handshake
//
// A client that connects receives a server hello:
//
//	"BCW1" (4 bytes) | server nonce (32 random bytes)
//
// and answers with:
//
//	"BCW2" (4 bytes) | client nonce (32 random bytes) |
//	HMAC-SHA256(secret, "burstcache client" | server nonce | client nonce)
//
// The server replies with a four-byte little-endian errno: EACCES refuses
// the client and closes the connection; 0 admits it and is followed by the
// server's own proof, HMAC-SHA256(secret, "burstcache server" | server nonce
// | client nonce). A client that finds the server's proof wrong closes the
// connection and treats the server as unreachable (ErrImpostor): whatever
// listens at the address is not a server of the instance, and a write it
// took would be lost to the instance, a read it answered forged. A server
// configured without a secret admits every client; both sides then compute
// the MACs with an empty key. The secret never crosses the wire, the nonces
// make every proof single-use, and the labels keep either side's proof from
// being sent back as the other's.
//
// Mounts of the first release answer "BCW1" | HMAC-SHA256(secret, server
// nonce), get the errno alone, and send their requests without tags. A
// server still admits them, so that a mount that runs while its instance's
// servers are upgraded goes on working; a party on the network cannot turn
// a "BCW2" answer into one. A client of this release refused by a
// first-release server, which takes only that answer, reports
// ErrUnauthenticated.
//
// A client given a mount key (Credentials.MountKey) answers "BCW3" instead,
// the "BCW2" answer followed by its Ed25519 signature of "burstcache mount"
// | server nonce | client nonce. A server told public mount keys
// (Server.MountKeys) admits only such an answer, signed with one of them,
// and refuses every other with the errno EPERM (ErrMountKeyRefused on the
// client); a server told none takes "BCW3" as "BCW2". A server of an
// earlier release refuses "BCW3" with EACCES, as it would a wrong secret,
// so a client refused that way after a signed answer connects once more
// and answers "BCW2".
//
// The handshake matters because every request carries the identity of the
// calling process (uid, gid, groups, capabilities) and a server started with
// --act-as-caller runs backing-store operations as that identity, trusting
// it. Only a peer that holds the secret (the FUSE daemon, which learns the
// identity from the kernel) may speak for a caller, and, where others may
// hold the secret too (on Kubernetes, whoever may read Secrets in the
// instance's namespace), only a peer that holds the mount key as well.
// Without a secret, a server must listen only where every peer is trusted,
// such as loopback on a single-user machine.
//
// Both sides then derive the connection's session key, HMAC-SHA256(secret,
// "burstcache session" | server nonce | client nonce), and the client tags
// every request with it (see Frames). So the handshake vouches for every
// request that follows on the connection, not only for the peer that made
// it: a third party on the network path cannot make a server act as another
// identity by rewriting or injecting requests, nor repeat or drop one
// unnoticed. The protocol does not encrypt, and file contents and replies
// are not tagged: such a party can still read what crosses the network and
// change file data in flight, as on NFS without Kerberos privacy.
//
// # Frames
//
// After the handshake both directions carry frames with a 20-byte header,
// all integers little-endian:
//
//	offset size field
//	0      8    request id, chosen by the client, echoed in the response
//	8      4    code: the operation (request) or an errno, 0 for success (response)
//	12     4    M, length of the metadata section
//	16     4    D, length of the data section
//	20     M    metadata
//	20+M   D    data
//
// The metadata of a request starts with the caller's identity (uid u32,
// gid u32, group count u16, groups u32 each, and, when the top bit of the
// count is set, the caller's effective capabilities u64, bit n for
// capability n, of which the server reads those that bear on file-system
// checks; a client sets it only for a server whose OpInfo says that it
// takes them, and a caller without them has what its uid gives), followed
// by the arguments of the operation, encoded with Encoder: fixed-width little-endian integers,
// and strings and byte slices as a u32 length followed by the bytes. It ends
// with a 16-byte tag: the first 16 bytes of HMAC-SHA256(session key, n | header
// | metadata before the tag), where n (u64) counts the requests sent before
// it on the connection. A server that finds a tag wrong closes the
// connection without serving the request (ErrForged); requests of a
// first-release mount have no tag. The data
// section carries file contents: the bytes to write in a request, the bytes
// read in a response. A client reads the data section of a response straight
// into the buffer the caller supplied, without an intermediate copy.
//
// M is at most MaxMeta and D at most MaxData; a peer that sends more is cut
// off. Errors travel as errno values (syscall.Errno), so the FUSE layer can
// hand them to the kernel unchanged.
package wire
