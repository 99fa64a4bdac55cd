// Package integration tests burstcache as users run it: real server and
// mount processes of the burstcache binary, a real FUSE mount, and plain
// directories as the backing file system. The binary is $BURSTCACHE_BIN, or
// is built once by TestMain. The tests need root and /dev/fuse, and skip
// without them.
package integration
