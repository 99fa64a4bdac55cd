package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/placement"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// localSlab reads the cached extents of a server on this machine from the
// server's slab file, instead of having them copied through the socket: the
// server answers where the bytes are and pins them (wire.OpReadSpans), and
// the client reads them itself and releases the pin.
type localSlab struct {
	addr  string
	creds wire.Credentials
	// srv has one connection: pins belong to the connection that made
	// them, and OpUnpin must travel on it.
	srv *wire.Client

	mu   sync.Mutex
	off  bool // the server cannot hand out its slab: read through it
	file *os.File
	id   slabID
	// raFile is a descriptor of the slab file raID for read-ahead
	// (readAheadFile); raOff: the server hands out none.
	raFile *os.File
	raID   slabID
	raOff  bool
	// old keeps descriptors of slab files replaced after a server restart
	// open, so that their numbers, which reads in flight may still use, are
	// not reused for other files.
	old []*os.File

	unpins unpinner
	leases leases
	pipes  writePipes
}

// slabID identifies a slab file by device and inode.
type slabID struct{ dev, ino uint64 }

func newLocalSlab(addr string, creds wire.Credentials, timeout time.Duration, extentSize int64) *localSlab {
	l := &localSlab{addr: addr, creds: creds}
	l.srv = wire.NewClient(addr, wire.ClientOptions{Secret: creds.Secret, MountKey: creds.MountKey, Conns: 1, DialTimeout: timeout})
	l.unpins.send = l.sendUnpins
	l.leases.es, l.leases.unpins = extentSize, &l.unpins
	return l
}

// usable reports whether reads should ask the server for spans.
func (l *localSlab) usable() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.off
}

// disable makes reads go through the server from now on.
func (l *localSlab) disable() {
	l.mu.Lock()
	l.off = true
	l.mu.Unlock()
}

// slab returns an open descriptor of the slab file id, asking the server
// for one if the descriptor held is of another file (the server restarted
// over a new cache directory) or there is none yet.
func (l *localSlab) slab(ctx context.Context, id slabID) (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil && l.id == id {
		return l.file, nil
	}
	f, _, err := wire.FetchFile(ctx, l.addr, l.creds, ident.Process(), wire.OpSlabFile, nil)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, err
	}
	if got := (slabID{st.Dev, st.Ino}); got != id {
		_ = f.Close()
		return nil, fmt.Errorf("slab of %s changed while it was fetched: %w", l.addr, syscall.ESTALE)
	}
	// Slots follow each other in the slab as extents do not in a file: the
	// kernel's read-ahead, which follows file offsets, would read other
	// extents' slots. The server reads ahead the slots of the next extents
	// of a sequential reader itself, and so does the client for the
	// extents it reads from leases (readAhead).
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	if l.file != nil {
		l.old = append(l.old, l.file)
	}
	l.file, l.id = f, id
	return f, nil
}

func (l *localSlab) close() {
	l.leases.close()
	l.pipes.close()
	_ = l.srv.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range append(l.old, l.file, l.raFile) {
		if f != nil {
			_ = f.Close()
		}
	}
	l.file, l.raFile, l.old = nil, nil, nil
}

// hold is something the server holds for the connection link: a pin or
// an open write, by the id it gave.
type hold struct {
	link wire.Link
	id   uint64
}

// sendUnpins releases pins, each on the connection that made it, and
// reports reads served from leases.
func (l *localSlab) sendUnpins(holds []hold, reads, bytes int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	byLink := map[wire.Link][]uint64{}
	for _, h := range holds {
		// A lost connection released its pins on the server already.
		if !h.link.Lost() {
			byLink[h.link] = append(byLink[h.link], h.id)
		}
	}
	unpin := func(ids []uint64, reads, bytes int64) *wire.Call {
		args := (&wire.Encoder{}).Uint32(uint32(len(ids)))
		for _, id := range ids {
			args.Uint64(id)
		}
		if reads > 0 {
			args.Uint64(uint64(reads)).Uint64(uint64(bytes))
		}
		return &wire.Call{Op: wire.OpUnpin, Cred: ident.Process(), Args: args.Bytes()}
	}
	for link, ids := range byLink {
		_, _ = link.Do(ctx, unpin(ids, reads, bytes))
		reads, bytes = 0, 0
	}
	if reads > 0 {
		_, _ = l.srv.Do(ctx, unpin(nil, reads, bytes))
	}
}

// unpinner batches pin releases, and the counts of reads served from
// leases: while one OpUnpin is in flight, what comes meanwhile waits and
// goes together in the next.
type unpinner struct {
	send         func(holds []hold, reads, bytes int64)
	mu           sync.Mutex
	holds        []hold
	reads, bytes int64
	running      bool
}

func (u *unpinner) add(h hold) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.holds = append(u.holds, h)
	u.startLocked()
}

func (u *unpinner) count(reads, bytes int64) {
	if reads == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reads += reads
	u.bytes += bytes
	u.startLocked()
}

func (u *unpinner) startLocked() {
	if !u.running {
		u.running = true
		go u.loop()
	}
}

func (u *unpinner) loop() {
	for {
		u.mu.Lock()
		holds, reads, bytes := u.holds, u.reads, u.bytes
		u.holds, u.reads, u.bytes = nil, 0, 0
		if len(holds) == 0 && reads == 0 {
			u.running = false
			u.mu.Unlock()
			return
		}
		u.mu.Unlock()
		u.send(holds, reads, bytes)
	}
}

// span is a piece of a read in the slab file; off < 0 means zeros.
type span struct {
	off int64
	n   int
}

// spansReply is a decoded OpReadSpans reply.
type spansReply struct {
	inline bool
	n      int // inline bytes
	id     slabID
	pin    uint64
	spans  []span
	// With a lease asked for: whether the server knows of leases, whether
	// the pin is one, and its terms.
	leases     bool
	leased     bool
	off        int64
	valid      int
	gen, epoch uint64
}

func decodeSpans(rep wire.Reply, askedLease bool) (spansReply, error) {
	d := wire.NewDecoder(rep.Meta)
	var r spansReply
	_ = d.Bool() // end of file: the client knows the size
	if r.inline = d.Bool(); r.inline {
		r.n = rep.N
		return r, d.Err()
	}
	r.id = slabID{d.Uint64(), d.Uint64()}
	r.pin = d.Uint64()
	for range d.Uint32() {
		r.spans = append(r.spans, span{off: d.Int64(), n: int(d.Uint32())})
		if d.Err() != nil {
			break
		}
	}
	if r.leases = askedLease && d.More(); r.leases {
		if r.leased = d.Bool(); r.leased {
			r.off, r.valid, r.gen, r.epoch = d.Int64(), int(d.Uint32()), d.Uint64(), d.Uint64()
		}
	}
	return r, d.Err()
}

// readLocal reads piece pc of path, held by the local server of l, into
// dst; with direct set it may instead return where the bytes are in the
// slab, pinned until the returned FileData is released. It reads from a
// lease on the piece's extent when it holds a current one, and otherwise
// asks the server where the bytes are, and for a lease.
func (f *FS) readLocal(ctx context.Context, l *localSlab, path string, pc placement.Piece, dst []byte, direct bool) (*namespace.FileData, error) {
	// A lease taken for reads of another backing file (an open before
	// the file was replaced) does not serve this one: the server checks.
	key := leaseKey{path, pc.Off / f.layout.ExtentSize, f.sourceOf(path)}
	in := pc.Off % f.layout.ExtentSize
	seq := l.readAhead(ctx, key, int64(f.layout.Servers), in == 0)
	if le := l.leases.get(key); le != nil {
		if in+int64(len(dst)) > int64(le.valid) {
			l.leases.release(le)
		} else if fd, err := readLeased(&l.leases, le, in, dst, direct); !errors.Is(err, errLeaseLost) {
			return fd, err
		}
	}
	// The server reads ahead for a reader that goes in order, which it
	// cannot tell by itself when some of the reads came from leases.
	args := namingFile(key.src, pathArgs(path).Int64(pc.Off).Uint32(uint32(len(dst))).Bool(true).Bool(seq))
	epoch := l.leases.epoch()
	rep, err := l.srv.Do(ctx, &wire.Call{Op: wire.OpReadSpans, Cred: cred(ctx), Args: args.Bytes(), Dst: dst})
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP) {
		l.disable()
		return nil, f.readPiece(ctx, path, pc, dst)
	}
	if err != nil {
		return nil, err
	}
	r, err := decodeSpans(rep, true)
	if err != nil || r.inline {
		clear(dst[r.n:])
		return nil, err
	}
	if !r.leases {
		l.leases.refused()
	}
	release := func() {
		if r.pin != 0 {
			l.unpins.add(hold{rep.Link, r.pin})
		}
	}
	file, err := l.slab(ctx, r.id)
	if err != nil {
		release()
		f.logSlabError(l, err)
		return nil, f.readPiece(ctx, path, pc, dst)
	}
	if slot := r.off / f.layout.ExtentSize; r.leased && l.leases.mapped(ctx, l, r.id, slot) {
		le := &lease{key: key, pin: hold{rep.Link, r.pin}, lost: rep.Link.Lost, file: file, off: r.off, valid: r.valid,
			slot: slot, gen: r.gen, epoch: r.epoch}
		l.leases.put(le)
		release = func() { l.leases.release(le) }
	}
	if direct && len(r.spans) == 1 && r.spans[0].off >= 0 && r.spans[0].n == len(dst) {
		return &namespace.FileData{Fd: file.Fd(), Off: r.spans[0].off, Len: len(dst), Release: release}, nil
	}
	defer release()
	if err := readSpans(file, r.spans, dst); err != nil {
		return nil, err
	}
	// Pins hold only while the server that made them runs: one that
	// restarted before the bytes were read (its epoch moved on) may have
	// put other extents in the slots.
	if epoch != 0 && l.leases.epoch() != epoch {
		return nil, f.readPiece(ctx, path, pc, dst)
	}
	return nil, nil
}

// errLeaseLost says a lease went stale while its slot was read.
var errLeaseLost = errors.New("lease lost during the read")

// readLeased reads dst at offset in of the extent of le, which ls.get
// handed out, and ends that read of le once the bytes are read. The bytes count
// only if the lease still holds after the read: a server that lost the pin
// meanwhile (it restarted while this client was held up, say) may have put
// another extent in the slot. Otherwise it returns errLeaseLost, and the
// caller asks the server. Bytes spliced to the kernel (direct) go out
// before anything can check them.
func readLeased(ls *leases, le *lease, in int64, dst []byte, direct bool) (*namespace.FileData, error) {
	release := func() { ls.release(le) }
	if direct {
		ls.served(len(dst))
		return &namespace.FileData{Fd: le.file.Fd(), Off: le.off + in, Len: len(dst), Release: release}, nil
	}
	defer release()
	if _, err := le.file.ReadAt(dst, le.off+in); err != nil {
		return nil, fmt.Errorf("reading the slab: %w", err)
	}
	if !ls.heldThrough(le) {
		return nil, errLeaseLost
	}
	ls.served(len(dst))
	return nil, nil
}

// readSpans copies spans of file into dst; what they do not cover, inside
// the size the client knows, is a hole.
func readSpans(file *os.File, spans []span, dst []byte) error {
	n := 0
	for _, s := range spans {
		if s.n > len(dst)-n {
			return fmt.Errorf("%w: spans past the read", wire.ErrProtocol)
		}
		if s.off < 0 {
			clear(dst[n : n+s.n])
		} else if _, err := file.ReadAt(dst[n:n+s.n], s.off); err != nil {
			return fmt.Errorf("reading the slab: %w", err)
		}
		n += s.n
	}
	clear(dst[n:])
	return nil
}

// localWriteMin is the smallest piece written through a local server's
// pipe: a smaller one costs less copied through the socket.
const localWriteMin = 32 << 10

// writeLocal writes piece pc of path, held by the local server of l,
// through a pipe of the server's: the client puts the bytes into the pipe
// without copying them (vmsplice), and the server moves them into its slab
// and answers, in one round trip. The client never writes the slab: a
// client stalled across a restart of the server, however long, finds its
// pipe closed, and cannot write into a slot the new server reused. A write
// the pipe cannot take goes through the socket.
func (f *FS) writeLocal(ctx context.Context, l *localSlab, path string, pc placement.Piece, data []byte) (wire.Reply, error) {
	p := l.pipes.get(ctx, l)
	if p == nil {
		return f.writePiece(ctx, path, pc, data)
	}
	if err := p.fill(data); err != nil {
		l.pipes.drop(p)
		return f.writePiece(ctx, path, pc, data)
	}
	args := f.writeArgs(ctx, path, pathArgs(path).Int64(pc.Off).Uint32(uint32(len(data))).Uint64(p.id))
	// The pipe refers to the pages of data until the server has moved
	// them, so the call is never given up halfway: data may be reused for
	// another write once this returns.
	rep, err := l.srv.Do(context.WithoutCancel(ctx), &wire.Call{Op: wire.OpWritePiped, Cred: cred(ctx), Args: args.Bytes()})
	if err == nil {
		l.pipes.put(p)
		return rep, nil
	}
	// The server closes the pipe after a failed write, and the bytes may
	// still be in it: it is not used again. Before data may be reused,
	// whatever the server has not taken leaves the pipe.
	p.empty()
	l.pipes.drop(p)
	switch {
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EOPNOTSUPP):
		l.pipes.disable()
	case !errors.Is(err, wire.ErrConnLost) && !errors.Is(err, syscall.EBADF) && !errors.Is(err, syscall.EINVAL):
		return wire.Reply{}, err
	}
	// The server restarted, or the connection broke with the write done
	// or not: writing the same bytes through the socket is right either way.
	return f.writePiece(ctx, path, pc, data)
}

// logSlabError stops local reads from a server whose slab cannot be
// opened; they go through the server from then on.
func (f *FS) logSlabError(l *localSlab, err error) {
	if errors.Is(err, syscall.ESTALE) {
		return
	}
	l.disable()
	f.log.Warn("Reading cached data through the server: its slab file cannot be opened", "server", l.addr, "err", err)
}
