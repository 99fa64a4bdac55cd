package client

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/seqread"
	"github.com/burstcache/burstcache/cacheserver/vfs"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// leaseReadAhead is how many extents of a file on one server a client reads
// into memory ahead of a sequential reader, from the slots it holds leases
// on. Reads served from leases never reach the server, so the server's own
// read-ahead (engine.readAheadSlots) does not see them: without this, a
// reader of a file it read before waited for the disk at every extent, in
// requests of the size it asked for.
const leaseReadAhead = 16

// maxStreamFiles bounds the files whose readers a client follows per
// server.
const maxStreamFiles = 1024

// aheadOf records a read of extent key.idx, reports whether it continues a
// reader of key.path that goes through the file in order on this server,
// stride extents at a time (package seqread), and if so returns the slab
// ranges to read ahead of it. Like the engine it works in batches, once the
// reader has consumed half the window, and returns the slots of
// consecutive extents that follow each other in the slab as one range.
// Only extents with a current lease are read ahead; the others go to the
// server when read.
func (ls *leases) aheadOf(key leaseKey, stride int64, head bool) (id slabID, seq bool, ranges []span) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := ls.streams[key.path]
	if st == nil {
		if ls.streams == nil || len(ls.streams) >= maxStreamFiles {
			ls.streams = map[string]*seqread.Streams{}
		}
		st = &seqread.Streams{}
		ls.streams[key.path] = st
	}
	seq, ahead := st.ReadAt(key.idx, stride, head, leaseReadAhead)
	for next := ahead.First; next <= ahead.Last; next += ahead.Stride {
		le := ls.m[leaseKey{key.path, next, key.src}]
		if le == nil || !ls.currentLocked(le) {
			continue
		}
		if k := len(ranges) - 1; k >= 0 && ranges[k].off+int64(ranges[k].n) == le.off {
			ranges[k].n += int(ls.es)
			continue
		}
		ranges = append(ranges, span{off: le.off, n: int(ls.es)})
	}
	return ls.id, seq, ranges
}

// readAhead starts reading the slab ranges of the extents after key into
// memory, when the reads of its file look sequential (aheadOf), and
// reports whether they do.
func (l *localSlab) readAhead(ctx context.Context, key leaseKey, stride int64, head bool) (seq bool) {
	id, seq, ranges := l.leases.aheadOf(key, stride, head)
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
	f, _, err := wire.FetchFile(ctx, l.addr, l.creds, ident.Process(), wire.OpSlabFile, nil)
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
