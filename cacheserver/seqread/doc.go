// Package seqread tells the readers of a file that go through it in order
// from the others, and says which extents to read ahead of them.
//
// A cache server holds every N-th extent of a striped file, so a reader in
// file order reaches it one stride of extents after another. Streams
// follows up to MaxStreams such readers of one file at once, as jobs that
// read disjoint segments of a shared file do, and takes a stream for
// sequential only after Confirm steps in order: a single step is no proof,
// and random readers of a large file take one by chance every few hundred
// reads, each of which would then read a whole window from the disk for
// nothing.
//
// Like the kernel's read-ahead, a sequential stream is read ahead in
// batches: the rest of its window once the reader has consumed half of it.
package seqread
