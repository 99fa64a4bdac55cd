// Command bench measures burstcache against the file systems it competes
// with, in one run on one machine, and prints ratios.
//
// It runs the same IOR-like workloads (file-per-process and shared-file
// sequential 1 MiB writes and reads, 4 KiB random reads and writes, and
// create/stat/unlink rates) against:
//
//   - raw: the backing directory itself;
//   - passthrough: a bare go-fuse loopback mount of the backing directory,
//     the cost of FUSE alone; on Linux 6.9 and later the kernel passes its
//     reads and writes through to the backing files, and the daemon never
//     sees them;
//   - FUSE: the same loopback with files the kernel cannot pass through, so
//     that its daemon serves every read and write, as burstcache's does:
//     the cost of a FUSE daemon's round trips;
//   - burstcache: a standalone cache (`burstcache local up`) over the backing
//     directory, cold (nothing cached), warm (everything cached), and while
//     write-back is running (warm again: each workload runs once first, so
//     that its data is cached, and for writes dirty, as in the warm column);
//   - warm, client cache: burstcache warm again, through a mount that keeps
//     data in the kernel's page cache and gathers small writes in its
//     write-back cache (`local up --client-cache`);
//   - slow: a backing store that adds a fixed latency to every operation
//     (a latency-injecting FUSE loopback with the kernel page cache off, the
//     way a remote parallel file system feels), alone and behind burstcache:
//     reads of data only the slow store holds (cold over slow: every extent
//     is copied up from it), then the same reads again, cached.
//
// Each burstcache workload starts from a cache with nothing dirty: what
// earlier workloads left to write back is written back first, so that a
// number does not depend on the workloads measured before it.
//
// Machines here are noisy, so each number is only compared with numbers
// measured in the same run, and the whole measurement runs -repeat times
// (three by default): the table gives the median of each cell, and each
// ratio is the median of the ratios the runs measured. Results go to stdout
// as a table, and with -out to
// a Markdown file and an SVG plot that the README shows.
//
//	go run ./test/bench -burstcache bin/burstcache -out docs/bench
package main
