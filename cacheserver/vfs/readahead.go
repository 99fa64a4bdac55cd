package vfs

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A read-ahead reads its range as a reader would, rather than with
// POSIX_FADV_WILLNEED, because the two differ in what reaches the disk. The
// hint reads into single pages, and a request holds at most as many pages
// as the device takes segments (254 on the virtio disks measured), so a
// range arrives as requests of 500 KiB or less. On the development VM,
// whose disk serves about a thousand large requests a second whether they
// hold 1 MiB or 4, the size of requests decides how fast slots are read.
//
// A read-ahead first faults its range in through a mapping it marks for
// huge pages (MADV_HUGEPAGE, then MADV_POPULATE_READ): the kernel then
// reads the file in folios of 2 MiB, two at a time, whatever it read
// before. Splicing the range into /dev/null, which it does where that
// fails, reads through the descriptor's read-ahead state, which the other
// readers of the slab share and which starts every range that does not
// follow the last one at small folios. Two readers of cached extents read
// 1.0-1.2 GB/s from the slab with the hint, 2.0-2.3 GB/s with the splice
// (requests of about 2 MiB on average) and 2.5-2.8 GB/s with the mapping
// and a longer window (about 3 MiB); the raw file, with the kernel's own
// read-ahead, reads 3.0-3.1 GB/s in requests of 3.5 MiB.
// Neither moves the bytes: both only bring the pages into the page cache.
//
// A read-ahead holds a thread while the disk reads, so at most
// maxReadAheads run at once; a hint past that falls back to the fadvise.
const maxReadAheads = 8

var readAheads = make(chan struct{}, maxReadAheads)

// readAheadPipe is the capacity asked for the pipe a read-ahead moves its
// pages through, and so the most one splice reads.
const readAheadPipe = 1 << 20

var devNull = sync.OnceValues(func() (*os.File, error) { return os.OpenFile(os.DevNull, os.O_WRONLY, 0) })

// WillNeed implements Advisor with ReadAhead.
func (f osFile) WillNeed(off, n int64) { ReadAhead(f.File, off, n) }

// ReadAhead starts reading [off, off+n) of f into the page cache in the
// background and returns at once. An error only means less read-ahead. A
// descriptor set for random access (POSIX_FADV_RANDOM) reads single pages
// whatever it is asked, so f should not be one. A range the page cache
// holds already costs one system call.
func ReadAhead(f *os.File, off, n int64) {
	if cached(f, off, n) {
		return
	}
	select {
	case readAheads <- struct{}{}:
		go func() {
			defer func() { <-readAheads }()
			if !noPopulate.Load() {
				err := populate(f, off, n)
				if err == nil {
					return
				}
				// A kernel without MADV_POPULATE_READ (before 5.14) or
				// huge pages says EINVAL; it will not learn them later.
				noPopulate.Store(errors.Is(err, unix.EINVAL))
			}
			if done, err := spliceToNull(f, off, n); err != nil {
				fadvise(f, off+done, n-done)
			}
		}()
	default:
		fadvise(f, off, n)
	}
}

// cached reports whether the page cache holds every page of [off, off+n) of
// f (cachestat(2), Linux 6.5 and later; older kernels report false). Read
// hits of data the page cache holds are the common case, and splicing them
// to /dev/null cost a fifth of their CPU time.
func cached(f *os.File, off, n int64) bool {
	rc, err := f.SyscallConn()
	if err != nil || n <= 0 {
		return false
	}
	page := int64(os.Getpagesize())
	first, end := off/page*page, (off+n+page-1)/page*page
	var cs unix.Cachestat_t
	r := unix.CachestatRange{Off: uint64(first), Len: uint64(end - first)}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		e := unix.Cachestat(uint(fd), &r, &cs, 0)
		ok = e == nil && int64(cs.Cache) >= (end-first)/page
	})
	return ok
}

// noPopulate is set once populate found that this kernel cannot do it.
var noPopulate atomic.Bool

// hugePage is the size of the folios a mapping marked for huge pages reads
// a file in.
const hugePage = 2 << 20

// populate reads [off, off+n) of f into the page cache by faulting it in
// through a read-only shared mapping marked for huge pages, which it then
// unmaps. Faults read whole aligned folios, so the range is widened to
// hugePage boundaries (within the file) to be read whole. It holds the
// descriptor meanwhile, as spliceToNull does.
func populate(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var perr error
	err = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if perr = unix.Fstat(int(fd), &st); perr != nil {
			return
		}
		first := off / hugePage * hugePage
		end := min((off+n+hugePage-1)/hugePage*hugePage, st.Size)
		if end <= first {
			return
		}
		var m []byte
		if m, perr = unix.Mmap(int(fd), first, int(end-first), unix.PROT_READ, unix.MAP_SHARED); perr != nil {
			return
		}
		defer func() { perr = errors.Join(perr, unix.Munmap(m)) }()
		if perr = unix.Madvise(m, unix.MADV_HUGEPAGE); perr != nil {
			return
		}
		perr = unix.Madvise(m, unix.MADV_POPULATE_READ)
	})
	return errors.Join(err, perr)
}

func fadvise(f *os.File, off, n int64) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.Fadvise(int(fd), off, n, unix.FADV_WILLNEED) })
}

// spliceToNull reads [off, off+n) of f into the page cache and discards
// it, returning how many bytes it read. It holds the descriptor for the
// whole time (Control), so a Close meanwhile waits for it rather than
// leaving it to read whatever file gets the descriptor's number next.
func spliceToNull(f *os.File, off, n int64) (done int64, err error) {
	null, err := devNull()
	if err != nil {
		return 0, err
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return 0, err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	// Best effort: a smaller pipe only costs more system calls.
	_, _ = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, readAheadPipe)
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	nullFd := int(null.Fd())
	cerr := rc.Control(func(fd uintptr) {
		for done < n {
			var in, out int64
			in, err = unix.Splice(int(fd), &off, p[1], nil, int(min(n-done, readAheadPipe)), 0)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil || in == 0:
				return // an error, or the end of the file
			}
			for in > 0 {
				out, err = unix.Splice(p[0], nil, nullFd, nil, int(in), 0)
				switch {
				case errors.Is(err, unix.EINTR):
					continue
				case err != nil:
					return
				}
				in -= out
				done += out
			}
		}
	})
	if cerr != nil {
		return done, cerr
	}
	return done, err
}

// Resident reports how many pages [off, off+n) of f spans and how many of
// them are in the page cache (mincore(2)).
func Resident(f *os.File, off, n int64) (pages, in int, err error) {
	m, err := unix.Mmap(int(f.Fd()), off, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, unix.Munmap(m)) }()
	page := int64(os.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, 0, errno
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return len(vec), in, nil
}
