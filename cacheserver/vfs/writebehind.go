package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// A WriteBehinder starts writing a range of its dirty pages to the disk
// and returns at once, so that the disk works while the writer goes on,
// rather than all at the next Sync. It is a hint: the data is durable only
// after a Sync, and a File without a page cache does not implement it.
type WriteBehinder interface {
	// WriteBehind starts writing [off, off+n) of the file to the disk.
	WriteBehind(off, n int64)
}

var _ WriteBehinder = osFile{}

// maxWriteBehinds bounds the write-behinds running at once. One blocks
// while the disk's queue is full; past the bound a hint is dropped, and
// the next Sync writes the range.
const maxWriteBehinds = 4

var writeBehinds = make(chan struct{}, maxWriteBehinds)

// WriteBehind implements WriteBehinder with sync_file_range(2), which
// starts the writes and waits for none of them.
func (f osFile) WriteBehind(off, n int64) { writeBehind(f.File, off, n) }

func writeBehind(f *os.File, off, n int64) {
	select {
	case writeBehinds <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-writeBehinds }()
		rc, err := f.SyscallConn()
		if err != nil {
			return
		}
		// Control holds the descriptor, so that a Close meanwhile waits
		// rather than this writing whatever file gets the number next.
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
		})
	}()
}
