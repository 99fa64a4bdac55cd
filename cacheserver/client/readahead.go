package client

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/vfs"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// leaseReadAhead is how many extents of a file on one server a client reads
// into memory ahead of a sequential reader, from the slots it holds leases
// on. Reads served from leases never reach the server, so the server's own
// read-ahead (engine.readAheadSlots) does not see them: without this, a
// reader of a file it read before waited for the disk at every extent, in
// requests of the size it asked for.
const leaseReadAhead = 8

// maxStreams bounds the files whose reads a client follows per server.
const maxStreams = 1024

// stream is where the reads of one file on one server are: the extent read
// last, and the last extent read ahead.
type stream struct {
	last, ahead int64
	seq         bool // the reads got to last in order
}

// aheadOf records a read of extent key.idx, reports whether the reads of
// key.path look sequential (the extent read before it is the one this
// server holds before it, stride extents earlier), and if so returns the
// slab ranges to read ahead after it. Like the engine it works in batches, once the reader has
// consumed half the window, and returns the slots of consecutive extents
// that follow each other in the slab as one range. Only extents with a
// current lease are read ahead; the others go to the server when read.
func (ls *leases) aheadOf(key leaseKey, stride int64) (id slabID, seq bool, ranges []span) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := ls.streams[key.path]
	if st == nil {
		if ls.streams == nil || len(ls.streams) >= maxStreams {
			ls.streams = map[string]*stream{}
		}
		ls.streams[key.path] = &stream{last: key.idx, ahead: key.idx}
		return ls.id, seq, nil
	}
	if st.last == key.idx {
		return ls.id, st.seq, nil
	}
	seq = st.last == key.idx-stride
	st.seq = seq
	st.last = key.idx
	end := key.idx + leaseReadAhead*stride
	next := key.idx + stride
	if !seq {
		st.ahead = key.idx
		return ls.id, seq, nil
	}
	if st.ahead >= next && st.ahead <= end {
		if st.ahead > key.idx+leaseReadAhead/2*stride {
			return ls.id, seq, nil
		}
		next = st.ahead + stride
	}
	st.ahead = end
	for ; next <= end; next += stride {
		le := ls.m[leaseKey{key.path, next}]
		if le == nil || !ls.currentLocked(le) {
			continue
		}
		if k := len(ranges) - 1; k >= 0 && ranges[k].off+int64(ranges[k].n) == le.off {
			ranges[k].n += int(ls.es)
			continue
		}
		ranges = append(ranges, span{off: le.off, n: int(ls.es)})
	}
	return ls.id, true, ranges
}

// readAhead starts reading the slab ranges of the extents after key into
// memory, when the reads of its file look sequential (aheadOf), and
// reports whether they do.
func (l *localSlab) readAhead(ctx context.Context, key leaseKey, stride int64) (seq bool) {
	id, seq, ranges := l.leases.aheadOf(key, stride)
	if len(ranges) == 0 {
		return seq
	}
	f := l.readAheadFile(ctx, id)
	if f == nil {
		return seq
	}
	for _, r := range ranges {
		vfs.ReadAhead(f, r.off, int64(r.n))
	}
	return seq
}

// readAheadFile returns a descriptor of the slab file id for read-ahead. It
// is a descriptor of its own: the one reads use is set for random access
// (POSIX_FADV_RANDOM), with which the kernel reads single pages whatever
// the read asks for, and so in small disk requests. It returns nil when
// there is none.
func (l *localSlab) readAheadFile(ctx context.Context, id slabID) *os.File {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.raFile != nil && l.raID == id {
		return l.raFile
	}
	if l.raOff {
		return nil
	}
	f, _, err := wire.FetchFile(ctx, l.addr, l.secret, ident.Process(), wire.OpSlabFile, nil)
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) {
		l.raOff = true
	}
	if err != nil {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || (slabID{st.Dev, st.Ino}) != id {
		_ = f.Close()
		return nil
	}
	if l.raFile != nil {
		l.old = append(l.old, l.raFile)
	}
	l.raFile, l.raID = f, id
	return f
}
