package engine

// freeSlots holds the free slots as a heap, lowest on top: the slot taken
// next is the lowest free one, so that a file that takes a slot finds the
// slots after it free for its next extents (slotRun) in whatever order
// slots were freed. A stack, as it was, handed out slots in the order they
// came back; those that leases had pinned come back one at a time, when
// each lease goes, so after a job rewrote its files the free list's top
// rarely held consecutive slots, runs no longer formed, and the extents of
// a file lay scattered over the slab: two readers of cached files read
// 1.2-1.4 GB/s from the disk in requests of 1-1.5 MiB where they read
// 1.7-2.0 GB/s in requests of 2-3 MiB on a fresh cache.
type freeSlots []int32

func (h freeSlots) len() int { return len(h) }

// peek returns the lowest free slot.
func (h freeSlots) peek() (int32, bool) {
	if len(h) == 0 {
		return 0, false
	}
	return h[0], true
}

// push adds s.
func (h *freeSlots) push(s int32) {
	*h = append(*h, s)
	a := *h
	for i := len(a) - 1; i > 0; {
		parent := (i - 1) / 2
		if a[parent] <= a[i] {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

// pop takes the lowest free slot.
func (h *freeSlots) pop() (int32, bool) {
	a := *h
	if len(a) == 0 {
		return 0, false
	}
	s := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		low, l, r := i, 2*i+1, 2*i+2
		if l < len(a) && a[l] < a[low] {
			low = l
		}
		if r < len(a) && a[r] < a[low] {
			low = r
		}
		if low == i {
			break
		}
		a[i], a[low] = a[low], a[i]
		i = low
	}
	*h = a
	return s, true
}
