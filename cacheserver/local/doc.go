// Package local runs a burstcache instance on one machine, without
// Kubernetes: N server processes and a FUSE mount process,
// all started from the burstcache binary, detached from the caller (own
// session, logs in files), so that they outlive the command that started
// them.
//
// # State
//
// An instance is found by its mount point. Its cache directory holds:
//
//	local.json       State: the servers (addresses, process ids, command
//	                 lines), the mount process, the backing directory; paths
//	                 and arguments that are not UTF-8 as {"base64": ...}
//	                 (control.Path), the others as strings
//	secret           the shared secret of the data path (mode 0600)
//	server-I/        server I's cache directory
//	server-I.sock    server I's data path, a Unix domain socket (loopback
//	                 TCP instead when the path is too long for a socket, or
//	                 has a comma, a quote or a newline, which the mount's
//	                 --servers list cannot hold);
//	                 the control API listens on a loopback port
//	logs/            server-I.log and mount.log
//	mount.exit.json  how the mount ended (--exit-file): code 0 when it
//	                 made durable and published everything it was given
//
// and a small pointer file, /run/burstcache/<hash of the mount point>.json
// (under the temporary directory when /run is not writable), names the cache
// directory, so that commands given only --mount find the state.
//
// Up over a cache directory whose state survives (an earlier Down that could
// not write everything back, or a crash) starts the servers again over their
// cache directories, which recovers their dirty data; Up of a running
// instance restarts the servers that died, on the same addresses. Either
// starts the servers with the arguments the state records (State.Settings),
// whatever the Config says, and the mount to match them: the data in their
// cache directories was cached and written under those. `local up` refuses
// flags that differ from them rather than ignore them.
package local
