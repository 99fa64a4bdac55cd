// Package slab stores fixed-size slots in one preallocated file.
//
// A slab file of n slots of size s is n*s bytes long and fully allocated with
// fallocate(2) when created, so writes into it overwrite allocated blocks:
// measured on the cache nodes, overwrites of preallocated space run at a steady
// disk speed while buffered writes that allocate new blocks (new files, file
// growth) swing by an order of magnitude. Slot i holds bytes [i*s, (i+1)*s).
// The slab knows nothing of what a slot holds; the extent index does.
// WriteByDescriptor lets the kernel copy into a slot (splice(2)) when the
// slab's file offers its descriptor.
package slab
