package server

import (
	"context"
	"errors"
	"fmt"
	"path"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

var metaHandlers = map[wire.Op]handlerFunc{
	wire.OpGetAttr:      (*Server).getAttr,
	wire.OpSetAttr:      (*Server).setAttr,
	wire.OpTruncate:     forgetting((*Server).truncate),
	wire.OpAccess:       (*Server).access,
	wire.OpReadDir:      (*Server).readDir,
	wire.OpMkdir:        (*Server).mkdir,
	wire.OpMknod:        (*Server).mknod,
	wire.OpRmdir:        (*Server).rmdir,
	wire.OpUnlink:       forgetting((*Server).unlink),
	wire.OpRename:       (*Server).rename,
	wire.OpSymlink:      (*Server).symlink,
	wire.OpReadlink:     (*Server).readlink,
	wire.OpSyncDir:      (*Server).syncDir,
	wire.OpLink:         (*Server).link,
	wire.OpCreate:       (*Server).create,
	wire.OpOpen:         (*Server).open,
	wire.OpGetxattr:     (*Server).getxattr,
	wire.OpSetxattr:     (*Server).setxattr,
	wire.OpListxattr:    (*Server).listxattr,
	wire.OpRemovexattr:  (*Server).removexattr,
	wire.OpClearSetid:   (*Server).clearSetid,
	wire.OpMayUnlink:    (*Server).mayUnlink,
	wire.OpTruncateOpen: forgetting((*Server).truncateOpen),
	wire.OpNoteHidden:   (*Server).noteHidden,
}

// withCacheSize folds the size the cache knows into the attributes of a
// regular file with one name, which the caller just read from the backing store: dirty
// data and recorded sizes past the backing end of file. Data that only the
// cache holds counts as allocated, in the 4 KiB blocks that the backing
// file system will give it, so that tools do not take the file for sparse
// and the count does not jump when the data is written back.
func (s *Server) withCacheSize(_ context.Context, p string, a namespace.Attr) namespace.Attr {
	if !a.IsRegular() || a.Nlink > 1 {
		// The cache passes the I/O of a file with several names through
		// to the backing file, which therefore knows its size; sizes noted
		// under one of its names are stale under another.
		return a
	}
	known, ok := s.cfg.Cache.KnownSize(p, a.Size)
	if !ok {
		known = 0
	}
	known = max(known, s.sizes.get(p))
	if known > a.Size {
		a.Size = known
		a.Blocks = max(a.Blocks, (known+4095)/4096*8)
	}
	return a
}

// answerAttr encodes the attributes of a successful call.
func (s *Server) answerAttr(ctx context.Context, p string, resp *wire.Response, a namespace.Attr, err error) error {
	if err != nil {
		return err
	}
	resp.Meta.Attr(s.withCacheSize(ctx, p, a))
	return nil
}

func (s *Server) getAttr(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	names, err := probeNames(req.Args)
	if err != nil {
		return err
	}
	a, errs, err := s.getAttrProbing(ctx, p, names)
	if err := s.answerAttr(ctx, p, resp, a, err); err != nil {
		return err
	}
	if len(names) > 0 {
		answerProbes(resp, errs)
	}
	return nil
}

// setAttr changes attributes on the backing store. A size change is checked
// and applied to the backing file here; the client then trims every server
// and finishes with OpTruncate.
func (s *Server) setAttr(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	in := req.Args.SetAttr()
	if err := req.Args.Err(); err != nil {
		return err
	}
	if in.Size != nil {
		if err := s.admitSize(ctx, p, *in.Size); err != nil {
			return err
		}
	}
	a, err := s.cfg.NS.SetAttr(ctx, p, in)
	if err := s.attrsChanged(ctx, err, p); err != nil {
		return err
	}
	if in.Size != nil {
		resp.Meta.Attr(a)
		return nil
	}
	resp.Meta.Attr(s.withCacheSize(ctx, p, a))
	return nil
}

// admitSize refuses a truncate of p to size that grows the file past the
// limit on file size: a file already past it (written on the backing store)
// may shrink, as a process past RLIMIT_FSIZE may shrink a local file.
// The size the file has is asked only for a size past the limit.
func (s *Server) admitSize(ctx context.Context, p string, size int64) error {
	if s.cfg.Cache.AdmitSize(p, 0, size) == nil {
		return nil
	}
	a, err := s.cfg.NS.GetAttr(ctx, p)
	if err != nil {
		return s.cfg.Cache.AdmitSize(p, 0, size)
	}
	return s.cfg.Cache.AdmitSize(p, s.withCacheSize(ctx, p, a).Size, size)
}

// truncate sets the size once every server dropped the data past it: the
// backing file is cut again, in case a write-back raced with the trims.
func (s *Server) truncate(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	size, viaOpen := req.Args.Int64(), req.Args.Bool()
	if viaOpen {
		return s.truncateThroughOpen(ctx, p, size, resp)
	}
	if err := s.cfg.Cache.Truncate(ctx, p, size); err != nil {
		return err
	}
	a, err := s.cutBacking(ctx, p, size, false)
	if err := s.attrsChanged(ctx, err, p); err != nil {
		return err
	}
	resp.Meta.Attr(a)
	return nil
}

// truncateThroughOpen finishes an ftruncate(2) of a file that the caller
// may no longer write by path, as after creating it with mode 0444: the
// caller's right is checked first, through the descriptor the namespace
// opens for it, and only then does the cache cut the file by path, with the
// server's own identity, under the lock that keeps write-back from racing
// with the cut.
func (s *Server) truncateThroughOpen(ctx context.Context, p string, size int64, resp *wire.Response) error {
	a, err := s.cutBacking(ctx, p, size, true)
	if err != nil {
		return err
	}
	if err := s.cfg.Cache.Truncate(s.serverCtx(ctx), p, size); err != nil {
		return err
	}
	resp.Meta.Attr(a)
	return nil
}

// OpenTruncater is implemented by a backing namespace that can truncate a
// file through a descriptor, as ftruncate(2) on a file the caller opened for
// writing does, even after the file lost its write permission.
type OpenTruncater interface {
	TruncateOpen(ctx context.Context, path string, size int64) (namespace.Attr, error)
}

// cutBacking sets the size of the backing file, through a descriptor when
// viaOpen and the namespace can.
func (s *Server) cutBacking(ctx context.Context, p string, size int64, viaOpen bool) (namespace.Attr, error) {
	if ot, ok := s.cfg.NS.(OpenTruncater); ok && viaOpen {
		return ot.TruncateOpen(ctx, p, size)
	}
	return s.cfg.NS.SetAttr(ctx, p, namespace.SetAttr{Size: &size})
}

// truncateOpen cuts the backing file as ftruncate(2) would; the client then
// trims every server and finishes with OpTruncate.
func (s *Server) truncateOpen(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	size := req.Args.Int64()
	if err := s.admitSize(ctx, p, size); err != nil {
		return err
	}
	a, err := s.cutBacking(ctx, p, size, true)
	if err := s.attrsChanged(ctx, err, p); err != nil {
		return err
	}
	resp.Meta.Attr(a)
	return nil
}

func (s *Server) access(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	return s.cfg.NS.Access(ctx, p, req.Args.Uint32())
}

func (s *Server) readDir(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	if req.Args.More() {
		cookie, size := req.Args.Uint64(), int(req.Args.Uint32())
		if err := req.Args.Err(); err != nil {
			return err
		}
		return s.readDirPage(ctx, p, cookie, min(max(size, 1), maxDirPage), resp)
	}
	es, err := s.cfg.NS.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	resp.Meta.DirEntries(es)
	return nil
}

// maxDirPage is about how many bytes of entries a page of a listing holds,
// far below wire.MaxMeta: the listing of a directory of a million files
// did not fit in one answer.
const maxDirPage = 1 << 20

// readDirPage answers the page of the listing of p that begins at cookie,
// of at most size bytes, then the cookie of the next page and whether this
// one is the last. A namespace that cannot page answers the whole listing
// at the first.
func (s *Server) readDirPage(ctx context.Context, p string, cookie uint64, size int, resp *wire.Response) error {
	pager, ok := s.cfg.NS.(namespace.DirPager)
	if !ok {
		if cookie != 0 {
			return fmt.Errorf("listing %q from cookie %d of a namespace that does not page: %w", p, cookie, syscall.EINVAL)
		}
		es, err := s.cfg.NS.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		resp.Meta.DirEntries(es).Uint64(0).Bool(true)
		return nil
	}
	es, next, done, err := pager.ReadDirPage(ctx, p, cookie, size)
	if err != nil {
		return err
	}
	resp.Meta.DirEntries(es).Uint64(next).Bool(done)
	return nil
}

func (s *Server) mkdir(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	ctx, mode, err := creation(ctx, req.Args, req.Args.Uint32())
	if err != nil {
		return err
	}
	a, err := s.cfg.NS.Mkdir(ctx, p, mode)
	return s.answerAttr(ctx, p, resp, a, s.namesChanged(ctx, err, p))
}

// creation reads the last arguments of a creation, whose mode was mode: a
// client that leaves the caller's umask to the backing file system sends
// the umask and the mode asked for after the others, and its mode before
// them is less the umask. A client of an earlier release sends neither,
// and its mode is the one to create exactly.
func creation(ctx context.Context, d *wire.Decoder, mode uint32) (context.Context, uint32, error) {
	if !d.More() {
		return ctx, mode, d.Err()
	}
	umask, mode := d.Uint32(), d.Uint32()
	return ident.WithUmask(ctx, umask), mode, d.Err()
}

func (s *Server) mknod(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	mode, dev := req.Args.Uint32(), req.Args.Uint64()
	ctx, mode, err = creation(ctx, req.Args, mode)
	if err != nil {
		return err
	}
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		a, err := s.cfg.NS.Mknod(ctx, p, mode, dev)
		return s.answerAttr(ctx, p, resp, a, s.namesChanged(ctx, err, p))
	}
	// A regular file made by mknod(2) is a create, under the same limits.
	reserved, err := s.admitWriter(p, false)
	if err != nil {
		return err
	}
	a, err := s.cfg.NS.Mknod(ctx, p, mode, dev)
	err = s.endReserve(ctx, p, reserved, a, err)
	return s.answerAttr(ctx, p, resp, a, s.namesChanged(ctx, err, p))
}

// admitWriter admits a create of p, or an open of it for writing: it
// returns the error a write would meet now (see Cache.AdmitWriter), or
// EDQUOT if the file would pass the limit on files, and otherwise whether
// it reserved a place for p under that limit, which endReserve ends.
// The place is reserved before the backing file is made, so that two
// creates do not both take the last one.
func (s *Server) admitWriter(p string, gathered bool) (reserved bool, err error) {
	if err := s.cfg.Cache.AdmitWriter(p, gathered); err != nil {
		return false, err
	}
	return s.cfg.Cache.ReserveFile(p)
}

// endReserve ends the reservation of admitWriter once the call it was made
// for ended with a and err: a regular file of one name that the call
// made or opened is recorded in the reserved place, and counts; otherwise
// the place is given back. A file of several names is not counted: the
// cache passes its writes through and holds nothing of it. It returns err,
// or the error of recording the file.
func (s *Server) endReserve(ctx context.Context, p string, reserved bool, a namespace.Attr, err error) error {
	if !reserved {
		return err
	}
	keep := err == nil && a.IsRegular() && a.Nlink <= 1
	if rerr := s.cfg.Cache.EndReserve(ctx, p, keep); err == nil {
		err = rerr
	}
	return err
}

// unlink removes the name on the backing store, then forgets what this
// server still caches of it, in case data came in after the client's drop.
func (s *Server) unlink(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	if err := s.cfg.NS.Unlink(ctx, p); err != nil {
		return err
	}
	s.cfg.Cache.NamesRemoved(ctx, p)
	s.hidden.forget(p)
	// What the cache saw of the removed file is stale, but dirty data
	// stays: a doomed file's waits for the client to end its doom, and a
	// file that another client created at p meanwhile may hold some.
	return s.cfg.Cache.ForgetRemoved(ctx, p)
}

// rmdir removes the directory on the backing store, for the next flush
// to make the removal durable.
func (s *Server) rmdir(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	if err := s.cfg.NS.Rmdir(ctx, p); err != nil {
		return err
	}
	s.cfg.Cache.NamesRemoved(ctx, p)
	return nil
}

func (s *Server) rename(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	oldPath, err := readPath(req.Args)
	if err != nil {
		return err
	}
	newPath, err := readPath(req.Args)
	if err != nil {
		return err
	}
	s.sizes.forget(oldPath)
	s.sizes.forget(newPath)
	if err := s.cfg.NS.Rename(ctx, oldPath, newPath, req.Args.Uint32()); err != nil {
		return err
	}
	// A hidden name given back to its file, after a rename that failed.
	s.hidden.forget(oldPath)
	return s.cfg.Cache.NamesMoved(ctx, oldPath, newPath)
}

func (s *Server) symlink(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	target := req.Args.String()
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	a, err := s.cfg.NS.Symlink(ctx, target, p)
	return s.answerAttr(ctx, p, resp, a, s.namesChanged(ctx, err, p))
}

func (s *Server) readlink(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	lr, ok := s.cfg.NS.(namespace.LinkReader)
	if withAttr := req.Args.More() && req.Args.Bool(); !withAttr || !ok {
		target, err := s.cfg.NS.Readlink(ctx, p)
		if err != nil {
			return err
		}
		resp.Meta.String(target)
		return nil
	}
	target, a, err := lr.ReadlinkAttr(ctx, p)
	if err != nil {
		return err
	}
	resp.Meta.String(target).Attr(a)
	return nil
}

// namesChanged tells the cache of the names at paths that a call, which
// ended with err, made or moved on the backing store, and returns err, or
// the cache's error making them durable: with Durability Backing, a call
// that returns has its names durable, as a close or fsync of the file
// need not come to this server.
func (s *Server) namesChanged(ctx context.Context, err error, paths ...string) error {
	if err != nil {
		return err
	}
	return s.cfg.Cache.NamesChanged(ctx, paths...)
}

// attrsChanged tells the cache of the backing file at p, whose inode a
// call, which ended with err, changed on the backing store (a truncate,
// chmod, chown, utimes), and returns err, or the cache's error making it
// durable: with Durability Backing, a call that returns has its change
// durable, as a flush of the file need not come to this server.
func (s *Server) attrsChanged(ctx context.Context, err error, p string) error {
	if err != nil {
		return err
	}
	return s.cfg.Cache.AttrsChanged(ctx, p)
}

// syncDir makes the entries of a backing directory durable.
func (s *Server) syncDir(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	ds, ok := s.cfg.NS.(namespace.DirSyncer)
	if !ok {
		return fmt.Errorf("fsync directory %q: %w", p, errNoSys)
	}
	return ds.SyncDir(ctx, p)
}

func (s *Server) link(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	oldPath, err := readPath(req.Args)
	if err != nil {
		return err
	}
	newPath, err := readPath(req.Args)
	if err != nil {
		return err
	}
	a, err := s.cfg.NS.Link(ctx, oldPath, newPath)
	return s.answerAttr(ctx, oldPath, resp, a, s.namesChanged(ctx, err, newPath))
}

// create creates and opens a regular file, and answers whether it existed.
// Without O_EXCL an existing file is opened as open does: O_TRUNC cuts the
// backing file, and the client, told that the file existed, trims every
// server as after an open. The kernel sends a create for a name it did not
// find, which another mount, or a server restart meanwhile, can have made.
func (s *Server) create(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	flags, mode := int(req.Args.Uint32()), req.Args.Uint32()
	gathered, err := optionalBool(req.Args)
	if err != nil {
		return err
	}
	ctx, mode, err = creation(ctx, req.Args, mode)
	if err != nil {
		return err
	}
	for {
		reserved, err := s.admitWriter(p, gathered)
		if err != nil {
			return s.openRefusedCreate(ctx, p, flags, gathered, err, resp)
		}
		a, err := s.cfg.NS.Create(ctx, p, flags|syscall.O_EXCL, mode)
		if !errors.Is(err, syscall.EEXIST) || flags&syscall.O_EXCL != 0 {
			err = s.endReserve(ctx, p, reserved, a, err)
			if err := s.namesChanged(ctx, err, p); err != nil {
				return err
			}
			answerIdentity(resp.Meta.Attr(s.withCacheSize(ctx, p, a)).Bool(false), a)
			return nil
		}
		_ = s.endReserve(ctx, p, reserved, a, err)
		a, err = s.openFile(ctx, p, flags, gathered)
		if errors.Is(err, syscall.ENOENT) {
			// Removed between the two calls: create it again.
			continue
		}
		if err != nil {
			return err
		}
		answerIdentity(resp.Meta.Attr(a).Bool(true), a)
		return nil
	}
}

// openRefusedCreate answers a create that the cache's limits refused with
// refused: an existing file is opened instead, as open(2) with O_CREAT does
// on a read-only file system, or, for O_EXCL, fails with EEXIST untouched.
func (s *Server) openRefusedCreate(ctx context.Context, p string, flags int, gathered bool, refused error, resp *wire.Response) error {
	var a namespace.Attr
	var err error
	if flags&syscall.O_EXCL != 0 {
		if _, err = s.cfg.NS.GetAttr(ctx, p); err == nil {
			return syscall.EEXIST
		}
	} else {
		a, err = s.openFile(ctx, p, flags, gathered)
	}
	if errors.Is(err, syscall.ENOENT) {
		return refused
	}
	if err != nil {
		return err
	}
	answerIdentity(resp.Meta.Attr(a).Bool(true), a)
	return nil
}

// open checks the caller may open the file. O_TRUNC cuts the backing file
// here; the client then trims every server and finishes with OpTruncate.
func (s *Server) open(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	flags := int(req.Args.Uint32())
	gathered, err := optionalBool(req.Args)
	if err != nil {
		return err
	}
	a, err := s.openFile(ctx, p, flags, gathered)
	if err != nil {
		return err
	}
	answerIdentity(resp.Meta.Attr(a), a)
	return nil
}

// answerIdentity ends the answer of an open or create with what, besides
// the inode number of its Attr, tells the backing file apart from one that
// replaces it under a reused number: its creation time (i64) and inode
// generation (u32), 0 where unknown. The client names them in its reads
// (wire.OpRead); clients of an earlier release ignore them.
func answerIdentity(e *wire.Encoder, a namespace.Attr) {
	e.Int64(a.Birth).Uint32(a.Gen)
}

// openFile checks the caller may open p with flags, and answers its
// attributes: those of the backing file just cut for O_TRUNC, which the
// client trims the servers to, and otherwise with the size the cache knows.
// An open for writing counts the file under the limit on files, as a
// create does: the limit holds at open, for every client, since the
// servers that take a file's writes do not count it (only its metadata
// server does), and the writes of a client whose kernel gathers them
// (gathered) reach the cache as page write-back, which passes the limit.
func (s *Server) openFile(ctx context.Context, p string, flags int, gathered bool) (namespace.Attr, error) {
	writing := flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0
	if writing && s.cfg.LoadBalanced {
		return namespace.Attr{}, fmt.Errorf("load-balanced instance is read-only: %w", syscall.EROFS)
	}
	if writing && s.draining.Load() {
		return namespace.Attr{}, errDraining
	}
	reserved := false
	if writing {
		var err error
		if reserved, err = s.admitWriter(p, gathered); err != nil {
			return namespace.Attr{}, err
		}
	}
	a, err := s.cfg.NS.Open(ctx, p, flags)
	err = s.endReserve(ctx, p, reserved, a, err)
	if err != nil {
		return a, err
	}
	if flags&syscall.O_TRUNC != 0 {
		return a, s.attrsChanged(ctx, nil, p)
	}
	return s.withCacheSize(ctx, p, a), nil
}

// clearSetid clears the setuid and setgid bits that the kernel clears when
// the caller writes (ident.Cred.KilledByWrite): the data lands in the
// cache, so the backing file system never sees the write that would have
// cleared them. It runs as the server, since the writer need not own the
// file.
func (s *Server) clearSetid(ctx context.Context, req *wire.Request, _ *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	cred, ok := ident.FromContext(ctx)
	if !ok {
		cred = ident.Process()
	}
	sctx := s.serverCtx(context.WithoutCancel(ctx))
	a, err := s.cfg.NS.GetAttr(sctx, p)
	if err != nil {
		return err
	}
	kill := cred.KilledByWrite(a.Mode, a.GID)
	if kill == 0 {
		return nil
	}
	mode := a.Mode & 07777 &^ kill
	_, err = s.cfg.NS.SetAttr(sctx, p, namespace.SetAttr{Mode: &mode})
	return s.attrsChanged(sctx, err, p)
}

// mayUnlink answers the attributes of p if the identity of ctx may remove
// it: write and search permission on its directory and, in a sticky
// directory, ownership of the file or the directory, or CAP_FOWNER.
func (s *Server) mayUnlink(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	p, err := readPath(req.Args)
	if err != nil {
		return err
	}
	dir := path.Dir("/" + p)[1:]
	if err := s.cfg.NS.Access(ctx, dir, accessW|accessX); err != nil {
		return err
	}
	a, err := s.cfg.NS.GetAttr(ctx, p)
	if err != nil {
		return err
	}
	d, err := s.cfg.NS.GetAttr(ctx, dir)
	if err != nil {
		return err
	}
	cred, ok := ident.FromContext(ctx)
	if !ok {
		cred = ident.Process()
	}
	if d.Mode&syscall.S_ISVTX != 0 && !cred.Capable(unix.CAP_FOWNER) && cred.UID != a.UID && cred.UID != d.UID {
		return syscall.EPERM
	}
	resp.Meta.Attr(a)
	return nil
}

const (
	accessW = 2 // W_OK of access(2)
	accessX = 1 // X_OK of access(2)
)
