package main

import (
	"bytes"
	"log"
	"os"

	"golang.org/x/sys/unix"
)

// pageReportingOrder is the smallest block of free memory that a virtual
// machine with free page reporting (virtio-balloon) hands back to its host.
const pageReportingOrder = "/sys/module/page_reporting/parameters/page_reporting_order"

// backMemory keeps the host's memory behind this machine for the whole
// measurement. With free page reporting, memory the guest frees (a dropped
// page cache, a workload's files) goes back to the host, and the guest's
// next use of it faults on the host page by page: writes into the page cache
// after a drop measured up to 40 times slower per byte, so a number depended
// on how much memory the workloads before it had freed. A machine a cache
// runs on in production does not do this. backMemory turns reporting off,
// then touches the free memory once so that the host backs it again, and
// returns a function that turns reporting back on. Without root, or on a
// machine without page reporting, it does nothing.
func backMemory() (restore func()) {
	old, err := os.ReadFile(pageReportingOrder)
	if err != nil {
		return func() {}
	}
	// An order past the largest block the page allocator has: nothing is
	// reported.
	if err := os.WriteFile(pageReportingOrder, []byte("11"), 0); err != nil {
		return func() {}
	}
	restore = func() { _ = os.WriteFile(pageReportingOrder, bytes.TrimSpace(old), 0) }
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return restore
	}
	free := int64(si.Freeram) * int64(si.Unit)
	touch := free - 2<<30 // leave the kernel room
	if touch <= 0 {
		return restore
	}
	log.Printf("Backing %d MiB of free memory", touch>>20)
	mem, err := unix.Mmap(-1, 0, int(touch), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err == nil {
		_ = unix.Munmap(mem)
	}
	return restore
}
