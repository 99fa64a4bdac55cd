package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/engine"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// Cache is the cache engine as the server uses it. Paths are clean and
// relative; ctx carries the identity for backing-store I/O.
type Cache interface {
	ReadAt(ctx context.Context, path string, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, path string, p []byte, off int64) (int, error)
	// KnownSize returns the size that only the cache knows for path (the
	// end of data written there, sizes given to ExtendSize and Truncate),
	// without asking the backing store, whose size for it the caller just
	// read (backingSize), and false if the cache holds nothing of path.
	KnownSize(path string, backingSize int64) (int64, bool)
	ExtendSize(ctx context.Context, path string, size int64) error
	// Truncate sets the size of path in the cache.
	Truncate(ctx context.Context, path string, size int64) error
	// Trim drops cached data of path past size.
	Trim(ctx context.Context, path string, size int64) error
	Sync(ctx context.Context, path string) error
	Drop(ctx context.Context, path string) error
	// Doom begins the unlink with id unlink of path: what the cache holds
	// of it is kept, durably, but not written back until EndDoom ends the
	// doom. It reports whether it kept anything; a file with nothing the
	// backing store lacks is dropped instead.
	Doom(ctx context.Context, path string, unlink uint64) (bool, error)
	// EndDoom ends the doom of path that the unlink began, as its removal
	// ended, once, and leaves any other alone.
	EndDoom(ctx context.Context, path string, unlink uint64, how engine.Unlinked) error
	// ForgetRemoved forgets the clean data of path, which an unlink just
	// removed from the backing store, and the size seen there; dirty data
	// stays.
	ForgetRemoved(ctx context.Context, path string) error
	// HoldDoom restarts the timeout of a doom of path, whose unlink is
	// still under way.
	HoldDoom(ctx context.Context, path string) error
	FlushAndDrop(ctx context.Context, path string) error
	// FlushAndDropKeepingCounts is FlushAndDrop, but the files that count
	// against the limit on files here keep their places: a rename or link
	// of the path, which may fail, comes next.
	FlushAndDropKeepingCounts(ctx context.Context, path string) error
	// Flush writes back everything; the error says why it could not.
	Flush(ctx context.Context) error
	FlushPath(ctx context.Context, path string) error
	// EvictPath writes back the data of path, a file or a tree, and drops
	// what is clean; the sizes the cache recorded stay.
	EvictPath(ctx context.Context, path string) error
	// WriteOut writes the dirty data of path, a file or a tree, to the
	// backing store, and returns once all of it is there, without waiting
	// for it to be made durable there; nothing is dropped.
	WriteOut(ctx context.Context, path string) error
	InvalidatePath(ctx context.Context, path string) error
	// NamesChanged is told of the names a metadata call made on the
	// backing store itself (a create, mkdir, mknod, symlink or link; a
	// rename goes to NamesMoved), which must be made durable there as
	// the durability says: before it returns with Backing, and before
	// Flush returns in any case.
	NamesChanged(ctx context.Context, paths ...string) error
	// NamesMoved is told of a rename of from to to that a metadata call
	// made on the backing store, and makes the names durable as
	// NamesChanged of both paths does; attribute changes that wait for
	// an fsync follow their files to the new name.
	NamesMoved(ctx context.Context, from, to string) error
	// AttrsChanged is told of the backing files whose inodes a metadata
	// call changed on the backing store itself (a truncate, chmod, chown,
	// utimes, a change of extended attributes), which must be fsynced as
	// NamesChanged says of names.
	AttrsChanged(ctx context.Context, paths ...string) error
	// NamesRemoved is told of the names an unlink or rmdir removed from
	// the backing store, which must be made durable before Flush returns.
	NamesRemoved(ctx context.Context, paths ...string)
	// AdmitWriter returns the error a write to path would meet now, for an
	// open of it for writing: a write window used up (EROFS) or, if
	// gathered (writes the client's kernel gathers), the backing store's
	// refusal of the data that fills the cache.
	AdmitWriter(path string, gathered bool) error
	// ReserveFile reserves a place under the limit on files for path,
	// about to be created or opened for writing, if the server counts it
	// and holds no record of it (reserved), or returns EDQUOT when there is
	// none. EndReserve ends a reservation: with keep the file is recorded
	// in its place, durably, else the place is given back.
	ReserveFile(path string) (reserved bool, err error)
	EndReserve(ctx context.Context, path string, keep bool) error
	// AdmitSize returns the error (EFBIG) that changing the size of path
	// from from to to would meet: growth past the limit, not a shrink. The
	// size of the backing file is set, and a size announced, only if the
	// servers holding the data would accept it.
	AdmitSize(path string, from, to int64) error
	Stats() control.Stats
	SetTunables(t control.Tunables) error
}

// Config configures a Server.
type Config struct {
	// Cache is the engine; NS the backing file system.
	Cache Cache
	NS    namespace.FS
	// Info describes the server in Stats.
	Info control.ServerInfo
	// Cred is the identity of backing-store operations, unless ActAsCaller.
	Cred ident.Cred
	// ActAsCaller runs backing-store operations as the identity in each
	// request.
	ActAsCaller bool
	// CallerUIDs and CallerGIDs, when set, are the identities a server
	// acting as the caller may act as: a caller other than root whose uid
	// or gid lies outside them is refused (EACCES), and supplementary
	// groups outside CallerGIDs are not used. They are the ids an
	// administrator mapped to the instance's namespace, which its pods
	// need not keep to.
	CallerUIDs, CallerGIDs ident.Ranges
	// LoadBalanced serves the instance read-only, each server whole files:
	// operations that would change the namespace or data fail with EROFS.
	LoadBalanced bool
	// Secret is the shared secret of the data path.
	Secret []byte
	// MountKeys, if not empty, admit to the data path only clients that
	// sign with one of them besides proving Secret (wire.Server.MountKeys).
	MountKeys []ed25519.PublicKey
	// Incarnation names the run of the cache in which nothing it
	// acknowledged was lost (engine.Engine.Incarnation); 0 draws a new
	// one, as if the server had crashed before.
	Incarnation uint64
	// HiddenNames is the file, in the cache directory, that records the
	// hidden names of files unlinked while open (see RemoveHidden); empty
	// keeps the records in memory.
	HiddenNames string
	// ServedCalls is the file, in the cache directory, that records the
	// control calls that change something the server served, so that its
	// next process refuses them too (control.HandlerConfig.ServedCalls);
	// empty keeps them in memory.
	ServedCalls string
	// RefuseUnaddressedCalls refuses the control calls whose signature
	// names no server, those of callers of earlier releases, so that a
	// call seen on its way to another server of the instance cannot be
	// sent to this one (control.HandlerConfig.RefuseUnaddressed). Calls
	// that name a server are served only if they name this one, Info.Index.
	RefuseUnaddressedCalls bool
	Log                    *slog.Logger
}

// ServedCallsFile is the name of the log of control calls served in a
// server's cache directory.
const ServedCallsFile = "served-calls.log"

// Server serves the data path and the control API.
type Server struct {
	cfg       Config
	log       *slog.Logger
	wire      wire.Server
	http      http.Server
	control   *control.Handler
	draining  atomic.Bool
	discarded atomic.Bool
	pipes     pipeTable
	serving   atomic.Bool
	sizes     sizeHints
	flushes   flushTimes
	preloads  preloadTally
	hidden    *hiddenNames
	notices   *notices

	slabOnce sync.Once
	slab     SlabID
	slabErr  error

	// incarnation names this run of the server; see Incarnation.
	incarnation uint64
	// outOfFilesLogged is when the server last logged that it ran out of
	// descriptors (UnixNano), or zero.
	outOfFilesLogged atomic.Int64
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Incarnation == 0 {
		cfg.Incarnation = newIncarnation()
	}
	hidden, err := openHiddenNames(cfg.HiddenNames)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Log, incarnation: cfg.Incarnation, hidden: hidden, notices: newNotices()}
	s.wire = wire.Server{Handler: s, Secret: cfg.Secret, MountKeys: cfg.MountKeys, Log: cfg.Log, OnConn: s.onConn, Inline: inlineOps}
	mux := http.NewServeMux()
	s.control, err = control.NewHandlerOf(s, control.HandlerConfig{Secret: cfg.Secret, ServedCalls: cfg.ServedCalls,
		Index: cfg.Info.Index, RefuseUnaddressed: cfg.RefuseUnaddressedCalls, Log: cfg.Log})
	if err != nil {
		hidden.close()
		return nil, err
	}
	mux.Handle("/", s.control)
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	s.http = http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// newIncarnation returns a random number other than zero, which clients
// take for "unknown" (a server too old to answer one).
func newIncarnation() uint64 {
	for {
		if n := rand.Uint64(); n != 0 {
			return n
		}
	}
}

// Incarnation returns the number that names this run of the server, or of
// its runs since the last crash (Config.Incarnation). Writes and syncs
// answer it (OpWrite, OpWritePiped, OpSync): a write that a server
// acknowledged before it crashed, and that no commit of its index covered,
// is gone when it starts again, so a client that finds another incarnation
// at the sync than at the write must report the write lost instead of
// calling it durable. A server that stopped cleanly lost nothing, and its
// engine keeps the number.
func (s *Server) Incarnation() uint64 { return s.incarnation }

// Serve serves the data path on data and the control API on ctl until
// Shutdown. It returns the first error of either.
func (s *Server) Serve(data, ctl net.Listener) error {
	errs := make(chan error, 2)
	s.serving.Store(true)
	s.notices.serving(time.Now())
	go func() { errs <- s.http.Serve(ctl) }()
	go func() { errs <- s.wire.Serve(data) }()
	s.log.Info("Serving", "data", data.Addr().String(), "control", ctl.Addr().String(),
		"index", s.cfg.Info.Index, "servers", s.cfg.Info.Servers, "actAsCaller", s.cfg.ActAsCaller)
	err := <-errs
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Shutdown stops serving: no new requests are taken, and the ones in flight
// finish, or are cancelled when ctx ends first (a writer waiting for space
// that only write-back to a broken backing store could free). It does not
// flush; nothing a request was cancelled in had been acknowledged.
func (s *Server) Shutdown(ctx context.Context) error {
	s.serving.Store(false)
	werr := s.wire.Shutdown(ctx)
	s.pipes.close()
	// The control API gets a moment of its own when the data path used up
	// ctx: its calls do not wait for space.
	hctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
	}
	herr := s.http.Shutdown(hctx)
	s.hidden.close()
	return errors.Join(werr, herr, s.control.Close())
}

// callerCtx returns the context under which a request touches the backing
// store.
func (s *Server) callerCtx(ctx context.Context, caller ident.Cred) context.Context {
	if s.cfg.ActAsCaller {
		return ident.NewContext(ctx, s.mappedGroups(caller))
	}
	return ident.NewContext(ctx, s.cfg.Cred)
}

// mappedGroups returns caller without the supplementary groups outside
// CallerGIDs.
func (s *Server) mappedGroups(caller ident.Cred) ident.Cred {
	unmapped := func(g uint32) bool { return !s.cfg.CallerGIDs.Contains(g) }
	if s.cfg.CallerGIDs == nil || !slices.ContainsFunc(caller.Groups, unmapped) {
		return caller
	}
	// A new slice: the request's stays as it came.
	caller.Groups = slices.DeleteFunc(slices.Clone(caller.Groups), unmapped)
	return caller
}

// admit refuses a caller that may not borrow the server's identity. A server
// acting as the caller lets the backing store judge root (the mount itself
// makes calls as root) and every caller whose uid and gid lie in
// CallerUIDs and CallerGIDs. A server
// acting as one configured identity serves only that identity and root (the
// job's own processes): any other user of the mount would otherwise touch the
// backing store with powers that are not its own.
func (s *Server) admit(caller ident.Cred) error {
	if s.cfg.ActAsCaller {
		if caller.UID != 0 && (s.cfg.CallerUIDs != nil && !s.cfg.CallerUIDs.Contains(caller.UID) ||
			s.cfg.CallerGIDs != nil && !s.cfg.CallerGIDs.Contains(caller.GID)) {
			return fmt.Errorf("%d:%d is not an identity this instance may act as: %w", caller.UID, caller.GID, syscall.EACCES)
		}
		return nil
	}
	if caller.UID == 0 || caller.UID == s.cfg.Cred.UID {
		return nil
	}
	return fmt.Errorf("uid %d may not act as this instance's identity %s: %w", caller.UID, s.cfg.Cred, syscall.EACCES)
}

// serverCtx returns the context of operations the server makes on its own
// behalf, such as clearing setuid bits. It replaces the caller's identity
// that handlers' contexts carry: a server acting as the caller acts on its
// own behalf as the process itself.
func (s *Server) serverCtx(ctx context.Context) context.Context {
	if s.cfg.ActAsCaller {
		return ident.NewContext(ctx, ident.Process())
	}
	return ident.NewContext(ctx, s.cfg.Cred)
}

// ServeWire serves one data-path request.
func (s *Server) ServeWire(ctx context.Context, req *wire.Request, resp *wire.Response) {
	h, ok := handlers[req.Op]
	if !ok {
		resp.Err = fmt.Errorf("operation %d: %w", req.Op, errNoSys)
		return
	}
	if s.cfg.LoadBalanced && mutating[req.Op] {
		resp.Err = fmt.Errorf("load-balanced instance is read-only: %w", syscall.EROFS)
		return
	}
	if err := s.admit(req.Cred); err != nil {
		resp.Err = err
		return
	}
	resp.Err = h(s, s.callerCtx(ctx, req.Cred), req, resp)
	if resp.Err == nil && req.Args.Err() != nil {
		resp.Err = req.Args.Err()
	}
	if resp.Err != nil {
		resp.Err = errnoOf(resp.Err)
		s.noteOutOfFiles(req.Op, resp.Err)
	}
}

type handlerFunc func(s *Server, ctx context.Context, req *wire.Request, resp *wire.Response) error

var handlers map[wire.Op]handlerFunc

// mutating are the operations a read-only (load-balanced) server refuses.
var mutating = map[wire.Op]bool{
	wire.OpWrite: true, wire.OpTrim: true, wire.OpExtendSize: true, wire.OpDrop: true,
	wire.OpSetAttr: true, wire.OpTruncate: true, wire.OpMkdir: true, wire.OpMknod: true,
	wire.OpRmdir: true, wire.OpUnlink: true, wire.OpRename: true, wire.OpSymlink: true,
	wire.OpLink: true, wire.OpCreate: true, wire.OpSetxattr: true, wire.OpRemovexattr: true,
	wire.OpClearSetid: true, wire.OpMayUnlink: true, wire.OpTruncateOpen: true, wire.OpWritePiped: true,
	wire.OpDoom: true, wire.OpEndDoom: true, wire.OpHoldDoom: true, wire.OpNoteHidden: true,
}

func init() {
	handlers = map[wire.Op]handlerFunc{}
	for op, h := range dataHandlers {
		handlers[op] = h
	}
	for op, h := range metaHandlers {
		handlers[op] = h
	}
}
