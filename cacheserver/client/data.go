package client

import (
	"context"
	"errors"
	"io"
	"slices"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/placement"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// asked returns the mark to give learn for an answer asked for now.
func (f *FS) asked() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.extensions
}

// learn records the attributes the servers answered for path to a request
// sent at mark since (asked). The answer's size replaces the one the
// client knew, unless a write of this client made the file longer after
// the request was sent: the server may have answered before that write,
// and the file is then the longer of the two, as the kernel keeps the size
// a write gave a file against an older answer (attr_version).
func (f *FS) learn(path string, a namespace.Attr, since uint64) {
	if !a.IsRegular() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stateLocked(path)
	if st.grewAt > since {
		st.size = max(a.Size, st.size)
	} else {
		st.size = max(a.Size, st.pending)
	}
	st.sized = true
	st.mode, st.gid = a.Mode, a.GID
	st.mtime = a.Mtime
}

// withWrites folds the time of this client's last write to path into its
// modification time: the backing file shows it only after write-back, and
// a job that wrote a file expects to see its mtime move.
func (f *FS) withWrites(path string, a namespace.Attr) namespace.Attr {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.files[path]; st != nil && a.IsRegular() && st.wrote.After(a.Mtime) {
		a.Mtime = st.wrote
	}
	return a
}

// setTimes records an explicit utimens of path, which overrides the times
// of earlier writes.
func (f *FS) setTimes(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.files[path]; st != nil {
		st.wrote = time.Time{}
	}
}

// size returns the size of path as this client knows it, asking the
// metadata server if it does not know it. What the client knows of a file
// may be forgotten at any time, by a close of another descriptor (Flush),
// even while the server answers: the answer stands then.
func (f *FS) size(ctx context.Context, path string) (int64, error) {
	f.mu.Lock()
	st := f.files[path]
	if st != nil && st.sized {
		defer f.mu.Unlock()
		return st.size, nil
	}
	f.mu.Unlock()
	a, err := f.GetAttr(ctx, path)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st = f.files[path]; st != nil {
		return max(st.size, a.Size), nil
	}
	return a.Size, nil
}

// ReadAt reads from the servers that hold the extents of the range, in
// parallel, up to the size of the file.
func (f *FS) ReadAt(ctx context.Context, path string, p []byte, off int64) (int, error) {
	n, _, err := f.read(ctx, path, p, off, false)
	return n, err
}

// ReadAtFile reads like ReadAt, except that when the whole range lies in
// one piece of the slab file of a server on this machine, it leaves the
// bytes there and returns where they are, pinned until the FileData is
// released, so that the caller can move them without a copy (splice).
func (f *FS) ReadAtFile(ctx context.Context, path string, p []byte, off int64) (int, *namespace.FileData, error) {
	return f.read(ctx, path, p, off, true)
}

// localReadMin is the smallest piece read from a local server's slab: a
// smaller one costs less copied through the socket than a pin and its
// release.
const localReadMin = 32 << 10

func (f *FS) read(ctx context.Context, path string, p []byte, off int64, direct bool) (int, *namespace.FileData, error) {
	size, err := f.size(ctx, path)
	if err != nil {
		return 0, nil, err
	}
	if off < 0 {
		return 0, nil, syscall.EINVAL
	}
	if off >= size {
		return 0, nil, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	pcs := f.layout.Split(path, off, n)
	var fd *namespace.FileData
	err = eachPiece(pcs, func(pc placement.Piece) error {
		dst := p[pc.Start:pc.End]
		if l := f.localOf(pc.Server); l != nil && (len(dst) >= localReadMin || l.leases.offered()) {
			d, err := f.readLocal(ctx, l, path, pc, dst, direct && len(pcs) == 1)
			if d != nil {
				fd = d // only for a lone piece, read without a goroutine
			}
			if f.loadBalanced && unreachable(err) {
				// Another server of the instance serves the file alike.
				return f.readPiece(ctx, path, pc, dst)
			}
			return err
		}
		return f.readPiece(ctx, path, pc, dst)
	})
	if err != nil {
		return 0, nil, err
	}
	if n < len(p) {
		return n, fd, io.EOF
	}
	return n, fd, nil
}

// readPiece reads one piece; what the server does not return, inside the
// size the client knows, is a hole.
func (f *FS) readPiece(ctx context.Context, path string, pc placement.Piece, dst []byte) error {
	args := f.naming(path, pathArgs(path).Int64(pc.Off).Uint32(uint32(len(dst))))
	rep, err := f.call(ctx, pc.Server, wire.OpRead, args, nil, dst)
	if err != nil {
		return err
	}
	clear(dst[rep.N:])
	return nil
}

// eachPiece runs fn for each of pcs, in parallel when there are several.
func eachPiece(pcs []placement.Piece, fn func(placement.Piece) error) error {
	return firstErrno(eachPieceErr(pcs, fn))
}

// eachPieceErr runs fn for each of pcs, in parallel when there are
// several, and returns the error of each.
func eachPieceErr(pcs []placement.Piece, fn func(placement.Piece) error) []error {
	if len(pcs) == 1 {
		return []error{fn(pcs[0])}
	}
	errs := make([]error, len(pcs))
	done := make(chan struct{}, len(pcs))
	for i, pc := range pcs {
		go func() {
			errs[i] = fn(pc)
			done <- struct{}{}
		}()
	}
	for range pcs {
		<-done
	}
	return errs
}

// WriteAt writes the extent pieces of p to their servers in parallel and
// remembers how far the file grew.
func (f *FS) WriteAt(ctx context.Context, path string, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, syscall.EINVAL
	}
	// A write is not given up when ctx is cancelled (a signal interrupting
	// the caller): the servers carry it out anyway, and a write the caller
	// made after one that returned early could land first and be undone.
	ctx = context.WithoutCancel(ctx)
	if err := f.clearSetid(ctx, path); err != nil {
		return 0, err
	}
	end := off + int64(len(p))
	pcs := f.layout.Split(path, off, len(p))
	var announce chan error
	if f.extends(path, end) && !f.holdsEnd(path, pcs) {
		// Tell the metadata server the new size alongside the data, so that
		// a client that opens the file after this one closed it sees it all.
		announce = make(chan error, 1)
		go func() {
			announce <- f.persist(ctx, f.layout.MetaServer(path), path, func() error {
				_, err := f.meta(ctx, path, wire.OpExtendSize, pathArgs(path).Int64(end).Bool(false))
				return err
			})
		}()
	}
	var took incarnations
	errs := eachPieceErr(pcs, func(pc placement.Piece) error {
		data := p[pc.Start:pc.End]
		var rep wire.Reply
		err := f.persist(ctx, pc.Server, path, func() (err error) {
			if l := f.localOf(pc.Server); l != nil && len(data) >= localWriteMin {
				rep, err = f.writeLocal(ctx, l, path, pc, data)
			} else {
				rep, err = f.writePiece(ctx, path, pc, data)
			}
			return err
		})
		if err == nil {
			took.add(pc.Server, writeIncarnation(rep))
		}
		return err
	})
	f.completeRefused(ctx, path, p, pcs, errs, &took)
	err := firstErrno(errs)
	announced := false
	if announce != nil {
		aerr := <-announce
		announced = aerr == nil
		err = firstErrno([]error{err, aerr})
	}
	// Pieces that were written are recorded even when others failed: the
	// next close makes them durable, or says that they were lost.
	f.markUnsynced(path, took.m)
	if err == nil {
		f.grew(path, end)
		return len(p), nil
	}
	if announced {
		// Every client would see the announced size, and read zeros up
		// to it, though the write did not get there.
		f.withdrawSize(ctx, path, end)
	}
	if n := shortOfRefusal(pcs, errs); n > 0 && !namespace.IsFromPageCache(ctx) {
		f.grew(path, off+int64(n))
		return n, nil
	}
	return 0, err
}

// completeRefused sends again, marked as completing the write, each piece
// of pcs that a server refused while a later piece landed: such a write
// would fail with bytes landed past the refused piece, which write(2)
// never leaves, and those bytes would be written back. The cache's own
// limits (the write window, and maxFiles at servers of an earlier
// release) let the piece in then; a server
// that has no room for it, full of data the backing store refuses, still
// refuses it. errs and took are updated with the outcome. Pages of the
// page cache, which those limits never refuse, are left alone.
func (f *FS) completeRefused(ctx context.Context, path string, p []byte, pcs []placement.Piece, errs []error, took *incarnations) {
	last := -1
	for i, err := range errs {
		if err == nil {
			last = i
		}
	}
	var again []placement.Piece
	var at []int
	for i := range last {
		if errs[i] != nil && refused(errs[i]) && !namespace.IsFromPageCache(ctx) {
			again, at = append(again, pcs[i]), append(at, i)
		}
	}
	if len(again) == 0 {
		return
	}
	reps := make([]wire.Reply, len(again))
	retried := eachPieceErr(again, func(pc placement.Piece) error {
		i := slices.Index(again, pc)
		var err error
		args := f.naming(path, completing(pathArgs(path).Int64(pc.Off)))
		reps[i], err = f.call(ctx, pc.Server, wire.OpWrite, args, p[pc.Start:pc.End], nil)
		return err
	})
	for j, err := range retried {
		errs[at[j]] = err
		if err == nil {
			took.add(again[j].Server, writeIncarnation(reps[j]))
		}
	}
}

// completing ends the arguments of a write with its mark as completing a
// write whose later pieces landed (after fromPageCache, false); servers
// of an earlier release ignore it.
func completing(args *wire.Encoder) *wire.Encoder {
	return args.Bool(false).Bool(true)
}

// withdrawSize takes back the size end of path that a write which failed
// announced to the metadata server. A server that does not answer keeps
// it until the file is truncated, renamed or removed, or the server
// restarts; the write fails anyway.
func (f *FS) withdrawSize(ctx context.Context, path string, end int64) {
	_, err := f.meta(ctx, path, wire.OpExtendSize, pathArgs(path).Int64(end).Bool(false).Bool(true))
	if err != nil {
		f.log.Warn("Taking back the size a failed write announced", "path", path, "size", end, "err", err)
	}
}

// shortOfRefusal returns the length of the pieces that were written, in
// order, before the first that a server refused (refused), when every piece
// after that was refused too: the write then ends short, as write(2) does
// on a local file system at a limit or when the disk fills, rather than
// fail over bytes it wrote. A limit on file size always refuses the end of
// a write; a server past its limit on files or its write window, or out of
// space, refuses its pieces wherever they are. The kernel takes a short
// write of its page cache for a whole one, so pages are not answered so.
func shortOfRefusal(pcs []placement.Piece, errs []error) int {
	n, refusing := 0, false
	for i, err := range errs {
		switch {
		case err == nil && !refusing:
			n = pcs[i].End
		case err == nil || !refused(err):
			return 0
		default:
			refusing = true
		}
	}
	if !refusing {
		return 0
	}
	return n
}

// refused reports whether err is a server's refusal to take a write, which
// it then did not carry out.
func refused(err error) bool {
	for _, e := range []syscall.Errno{syscall.EFBIG, syscall.EDQUOT, syscall.EROFS, syscall.ENOSPC} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// writePiece sends one piece to its server.
func (f *FS) writePiece(ctx context.Context, path string, pc placement.Piece, data []byte) (wire.Reply, error) {
	return f.call(ctx, pc.Server, wire.OpWrite, f.writeArgs(ctx, path, pathArgs(path).Int64(pc.Off)), data, nil)
}

// writeArgs ends the arguments of a write of path with whether its bytes
// come from the kernel's page cache (namespace.FromPageCache), that it
// completes nothing, and the backing file that the open of path found
// (naming); servers of an earlier release ignore them.
func (f *FS) writeArgs(ctx context.Context, path string, args *wire.Encoder) *wire.Encoder {
	return f.naming(path, args.Bool(namespace.IsFromPageCache(ctx)).Bool(false))
}

// holdsEnd reports whether the last of pcs, which ends the write, goes to the
// metadata server of path. That server then learns the new size from the
// data it caches, and answers it to every client without being told.
func (f *FS) holdsEnd(path string, pcs []placement.Piece) bool {
	return len(pcs) > 0 && pcs[len(pcs)-1].Server == f.layout.MetaServer(path)
}

// extends reports whether a write up to end makes path longer than this
// client knows it to be.
func (f *FS) extends(path string, end int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.files[path]
	return st == nil || end > st.size
}

// grew records that this client wrote up to end, now.
func (f *FS) grew(path string, end int64) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stateLocked(path)
	st.wrote = now
	if f.extendLocked(st, end) {
		st.pending = end
		f.kickPush()
	}
}

// stateLocked returns the state of path, new if the client knows nothing
// of it. Called with f.mu held.
func (f *FS) stateLocked(path string) *fileState {
	st := f.files[path]
	if st == nil {
		st = &fileState{}
		f.files[path] = st
	}
	return st
}

// extendLocked records that this client's writes reach end of the file of
// st, and reports whether that made the file longer than the client knew
// it (marking it for learn). Called with f.mu held.
func (f *FS) extendLocked(st *fileState, end int64) bool {
	if end <= st.size {
		return false
	}
	f.extensions++
	st.size, st.grewAt = end, f.extensions
	return true
}

// clearSetid asks the metadata server to clear the setuid and setgid bits
// before a write, where the kernel would clear them for the caller
// (ident.Cred.KilledByWrite). The bits the server cleared are gone from
// the mode this client knows, so the next write of the caller asks no
// more; another caller may still have more bits to clear.
func (f *FS) clearSetid(ctx context.Context, path string) error {
	c := cred(ctx)
	f.mu.Lock()
	st := f.files[path]
	var kill uint32
	if st != nil {
		kill = c.KilledByWrite(st.mode, st.gid)
	}
	f.mu.Unlock()
	if kill == 0 {
		return nil
	}
	if _, err := f.meta(ctx, path, wire.OpClearSetid, pathArgs(path)); err != nil {
		return err
	}
	f.mu.Lock()
	st.mode &^= kill
	f.mu.Unlock()
	return nil
}

// pushSize tells the metadata server how far this client's writes extended
// path. It runs as the caller of ctx.
func (f *FS) pushSize(ctx context.Context, path string) error {
	f.sizeMu.RLock()
	defer f.sizeMu.RUnlock()
	f.mu.Lock()
	st := f.files[path]
	var end int64
	if st != nil {
		end, st.pending = st.pending, 0
	}
	f.mu.Unlock()
	if end == 0 {
		return nil
	}
	err := f.retryLost(func() error {
		_, err := f.meta(ctx, path, wire.OpExtendSize, pathArgs(path).Int64(end).Bool(true))
		return err
	})
	if err != nil {
		// The state may have been forgotten meanwhile (a close of another
		// descriptor, which found nothing pending): the size is still
		// this client's to publish.
		f.mu.Lock()
		st = f.stateLocked(path)
		st.pending = max(st.pending, end)
		f.extendLocked(st, end)
		f.mu.Unlock()
	}
	return err
}

// Released is called by the FUSE layer when the mount released its last
// descriptor of path: the client forgets what it knew of the file, unless
// it still has a size to tell the metadata server.
func (f *FS) Released(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.files[path]; st != nil && st.pending == 0 {
		delete(f.files, path)
	}
	f.forgetSources(path)
}

// forget drops what the client knows about path.
func (f *FS) forget(paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range paths {
		delete(f.files, p)
	}
	f.forgetSources(paths...)
}
