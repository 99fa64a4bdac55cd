// Package posix runs POSIX test suites over a real burstcache mount:
// pjdfstest and fsx (installed from crates.io by hack/cargo-tool.sh),
// fio's verifying workloads (installed from Debian by hack/debian-tool.sh),
// go-fuse's posixtest, a behaviour suite of errno values and open-file
// semantics, a random differential test against a plain directory, and the
// permission test for both identity modes.
//
// Every suite gets its mount from mountUnderTest, the one place that decides
// what is under test. TestMain runs the whole package once for each set-up
// named in BURSTCACHE_POSIX_SETUPS (comma-separated; both when unset):
// "inprocess" is a FUSE mount of fusefs over posixns in the test
// process; "local" is a real instance started with `burstcache local up`
// (two cache servers, a cache small enough that eviction and write-back run,
// and more `burstcache mount` processes for the client cache and for
// sharing), with the binary from BURSTCACHE_BIN or built for the run.
// Assertions about the backing directory call settleBacking first, which
// writes the cache's dirty data back. Hard links of the "local" set-up do
// not share cached data (extents are keyed by path), so the differential
// test leaves link out there. BURSTCACHE_POSIX_DEBUG=1 logs every FUSE
// request of the in-process mounts. The tests need root: they mount with mount(2) and switch to
// unprivileged identities.
package posix
