// Package pattern makes the deterministic file contents that the end-to-end
// workload writes through a cache and the suite expects to find on the
// backing file system: the bytes of a file are a function of its name and
// size alone, so the suite can check the PFS without trusting the workload.
package pattern
