// Package seqread tells the readers of a file that go through it in order
// from the others, and says which extents to read ahead of them.
//
// A cache server holds every N-th extent of a striped file, so a reader in
// file order reaches it one stride of extents after another. Streams
// follows up to MaxStreams such readers of one file at once, as jobs that
// read disjoint segments of a shared file do, and takes a stream for
// sequential only after Confirm steps in order. A single step is no proof:
// random readers of a file take one by chance every hundred reads or so,
// and each would then read a whole window from the disk for nothing.
// Random 4 KiB reads of a 512 MiB file held by two servers read 55 KiB
// from the disk for each 4 KiB when one step was enough. Two steps in a
// row come by chance a few times in ten thousand reads, and a third step
// would only hold back read-ahead of every sequential reader by one more
// extent.
//
// Like the kernel's read-ahead, a sequential stream is read ahead in
// batches: the rest of its window once the reader has consumed half of it.
package seqread
