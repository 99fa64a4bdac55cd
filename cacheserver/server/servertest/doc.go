// Package servertest starts cache servers for tests: real servers on
// loopback over a stand-in cache engine (MemCache) that keeps data in memory
// and writes it back to a directory on Flush.
package servertest
