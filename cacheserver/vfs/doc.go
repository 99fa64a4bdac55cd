// Package vfs is the file-system seam of the cache directory.
//
// The cache engine reaches its local files (the slab that holds extents) only
// through FS, and runs every commit of its index through FS.Durable, so that a
// test can substitute a file system that crashes. OS is the real file system.
// Crashable wraps another FS and models a machine that loses power: writes
// that were not followed by Sync are undone (all of them, or a random subset,
// since a disk may persist unsynced writes in any order), and from the
// crash on every operation fails with ErrCrashed. A crash can be triggered by
// hand or at the n-th durable step (a Sync or a Durable call), which lets a
// test crash an engine at every point where it makes data durable.
//
// A File may also be a DescriptorWriter, which lets the kernel write into it
// directly (splice, copy_file_range). Crashable records what such a write
// overwrites, as it does for WriteAt, so that a crash can undo it.
package vfs
