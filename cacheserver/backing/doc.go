// Package backing is the store behind a cache: the parallel file system whose
// files the cache keeps extents of.
//
// Store is the interface the cache engine uses. Dir implements it over a POSIX
// directory: ranged reads and writes go to the same offsets of the same
// relative paths, writes create missing files and parent directories, and
// regions never written stay holes, so sparse files stay sparse. What a write
// creates only its owner may read (files 0600, directories 0700): a file a
// job created through the cache exists on the backing store before its first
// write, so a write that creates one writes back a file removed behind the
// cache's back, and the mode of the file, and of any directory removed with
// it, is gone with them; data written back must not become readable by
// anyone its owner had not let read it. Dir runs every system call
// under the identity carried by the call's context (see package ident), so
// the kernel checks permissions, parent directories included, as if the
// caller touched the file system itself.
//
// RangeCopier is an optional part of a Store: copying a range of a file into
// a local file in the kernel, so that copy-up does not pass the bytes through
// user memory. Dir implements it with splice(2) through a pipe, which works
// across file systems and costs less CPU time than copy_file_range(2) (see
// Dir.CopyRange), except from files of FUSE file systems, which it reads
// through a buffer: splice would ask them for each range in small pieces,
// one after the other (see copierFor).
//
// Faulty wraps a Store to add latency, inject errors and count calls, for
// tests of what the engine does when the backing store is slow or failing.
package backing
