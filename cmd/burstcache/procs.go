package main

import (
	"os"
	"runtime"
)

// mountProcs is the fewest Ps a mount runs with.
const mountProcs = 4

// raiseProcs gives the mount's scheduler at least mountProcs Ps. Its
// goroutines spend most of their time in blocking system calls (reads of
// /dev/fuse, and of slabs for the extents it holds leases on), and the
// runtime hands on the P of a thread blocked in one only when its monitor
// notices, 20 us or more later: with as many Ps as the two CPUs of the
// machine it was measured on, a request that woke a reader often waited
// for a P, and random 4 KiB reads of cached files took 10% longer. go-fuse
// also starts as many readers of /dev/fuse as there are Ps. A GOMAXPROCS
// set in the environment is left alone.
func raiseProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if runtime.GOMAXPROCS(0) < mountProcs {
		runtime.GOMAXPROCS(mountProcs)
	}
}
