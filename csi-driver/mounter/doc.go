// Package mounter starts and stops the FUSE daemons (`burstcache mount`)
// that serve a cache instance at a node's staging path, in a way that
// outlives the CSI node plugin that asked for them.
//
// Two implementations share one contract (Mounter) and one set of files in
// the mount's state directory (Spec.Dir):
//
//   - secret: the data-path shared secret, mode 0600, passed to the daemon
//     with --secret-file, never in its argv or environment;
//   - ready.json: written by the daemon once the mount serves;
//   - exit.json: written by the daemon as it ends, {"code": 0} when it
//     unmounted and published everything it wrote. A daemon killed outright
//     writes none, which reads as "did not publish";
//   - mount.log: the daemon's output (Process only; a mount pod logs to its
//     container log).
//
// Process runs the daemon as a detached process in its own session, so a
// restart of the plugin process leaves it running. Pod runs it in a
// privileged pod pinned to the node, so that a restart of the plugin's
// container, or an upgrade of its DaemonSet, leaves it running.
package mounter
