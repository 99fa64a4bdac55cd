package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/backing"
	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/placement"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// ErrMisconfigured is returned by Connect when a server is not the one the
// client expects at its place in the list.
var ErrMisconfigured = errors.New("cache servers do not match the client's configuration")

// Options configure a client.
type Options struct {
	// Servers are the data addresses of the servers, in index order.
	Servers []string
	// Secret is the servers' shared secret.
	Secret []byte
	// MountKey signs the handshake with each server, for servers that
	// admit only mounts (wire.Credentials.MountKey).
	MountKey ed25519.PrivateKey
	// ExtentSize is the striping unit; 0 means placement.DefaultExtentSize.
	ExtentSize int64
	// Conns is the number of connections per server; 0 means
	// wire.DefaultConns.
	Conns int
	// DialTimeout bounds connecting to a server.
	DialTimeout time.Duration
	// LoadBalanced reads a read-only instance whose servers each serve
	// whole files: the client uses one server, chosen by Node.
	LoadBalanced bool
	// Node names the client's node; clients on one node use one server.
	Node string
	// RemoteReads makes the client read every extent through its server's
	// socket, also from servers on this machine, whose slab files it
	// otherwise reads itself.
	RemoteReads bool
	// GathersWrites tells the servers that the kernel gathers this
	// client's writes in its page cache (a mount with the client cache):
	// they arrive as page write-back, which the servers take even past
	// their limits on new writes, so an open for writing is held to those
	// limits as a create is (see wire.OpOpen).
	GathersWrites bool
	// DoomHold is how often an unlink under way tells the servers that
	// keep the file's data doomed that it still is; 0 means 30 seconds. It
	// must stay well under the servers' doom timeout (two minutes by
	// default).
	DoomHold time.Duration
	// LostUnlinkWait is how long an unlink whose answer got lost keeps the
	// file doomed before the servers ask the backing store whether it is
	// gone; 0 means 15 seconds. A metadata server that stops lets the
	// requests in flight finish for 10 seconds, so the removal may be under
	// way for that long.
	LostUnlinkWait time.Duration
	// Log receives the client's warnings; nil means slog.Default().
	Log *slog.Logger
}

// FS is a namespace.FS over a striped set of cache servers.
type FS struct {
	layout  placement.Layout
	servers []serverConn
	// local has, for each server on this machine, its slab reader; nil
	// for the others.
	local []*localSlab
	log   *slog.Logger
	// doomHold is Options.DoomHold, lostUnlinkWait Options.LostUnlinkWait.
	doomHold, lostUnlinkWait time.Duration
	// indexes are the servers' indexes in the instance: 0..N-1 when
	// striped, the one chosen server when load-balanced.
	indexes      []int
	total        int
	loadBalanced bool
	// gathers is Options.GathersWrites.
	gathers bool
	// conns is how many connections the client keeps to each server.
	conns int
	// addrs are the addresses of every server of the instance, and wopts
	// how to connect to them, for Watch.
	addrs []string
	wopts wire.ClientOptions

	mu    sync.Mutex
	files map[string]*fileState
	// sources are the identities of the backing files that the last
	// opens of paths found, until the mount releases them (opened). Every
	// read and write looks them up, under srcMu, not mu, which they would
	// otherwise contend for with everything else of the client.
	srcMu   sync.Mutex
	sources map[string]backing.FileID
	// extensions counts the writes of this client that made a file longer
	// than it knew it to be; see fileState.grewAt.
	extensions uint64
	// unsynced holds, for each file this client wrote to since it last
	// made it durable (Fsync, or the close after the writes), the servers
	// the writes went to and the incarnations of theirs that took them.
	unsynced map[string]map[int]uint64

	// sizeMu orders size publication with the sequences that cut or
	// remove a file: a publication holds it shared through its round trip,
	// truncate, unlink and rename hold it exclusively, so that a size
	// published in the background never lands after a truncation and
	// grows the file again. It is taken before mu.
	sizeMu sync.RWMutex

	kick       chan struct{}
	stop       chan struct{}
	pusherDone chan struct{}
	closed     sync.Once
	closeErr   error
	// giveUp is closed once writes of cached pages stop waiting for their
	// servers (Stopping); stopping makes that happen once.
	giveUp   chan struct{}
	stopping sync.Once
}

// fileState is what the client knows about a file it has opened.
type fileState struct {
	// size is the size learned from the servers or extended by writes.
	// Without sized, a write made the state of a file the client had
	// forgotten (Flush, at another descriptor's close), and size is only
	// where that write ended: the file may go on past it.
	size  int64
	sized bool
	// grewAt is FS.extensions after the last write of this client that made
	// the file longer. An answer about the file asked for before then may
	// not know of that write: it does not make the size smaller (learn).
	grewAt uint64
	// pending is the end of this client's writes that the metadata server
	// has not been told about; 0 if none.
	pending int64
	// mode and gid are the mode and group learned from the servers, less
	// the setuid and setgid bits this client had cleared for writing.
	mode, gid uint32
	// wrote is the time of this client's last write, which the backing
	// file does not show until write-back; zero after an explicit utimens.
	wrote time.Time
	// mtime is the modification time learned from the servers.
	mtime time.Time
}

var _ namespace.FS = (*FS)(nil)

// New returns a client of the servers in opts. It does not connect; see
// Connect.
func New(opts Options) (*FS, error) {
	if len(opts.Servers) == 0 {
		return nil, fmt.Errorf("no cache servers given: %w", syscall.EINVAL)
	}
	if opts.ExtentSize <= 0 {
		opts.ExtentSize = placement.DefaultExtentSize
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.DoomHold <= 0 {
		opts.DoomHold = 30 * time.Second
	}
	if opts.LostUnlinkWait <= 0 {
		opts.LostUnlinkWait = 15 * time.Second
	}
	f := &FS{
		total: len(opts.Servers), loadBalanced: opts.LoadBalanced, gathers: opts.GathersWrites, log: opts.Log, doomHold: opts.DoomHold, lostUnlinkWait: opts.LostUnlinkWait,
		files: map[string]*fileState{}, sources: map[string]backing.FileID{}, unsynced: map[string]map[int]uint64{}, conns: opts.Conns,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), pusherDone: make(chan struct{}), giveUp: make(chan struct{}),
	}
	if f.conns <= 0 {
		f.conns = wire.DefaultConns
	}
	for i := range opts.Servers {
		f.indexes = append(f.indexes, i)
	}
	if opts.LoadBalanced {
		f.indexes = []int{int(placement.Hash(opts.Node) % uint64(len(opts.Servers)))}
	}
	f.layout = placement.Layout{Servers: len(f.indexes), ExtentSize: opts.ExtentSize}
	wopts := wire.ClientOptions{Secret: opts.Secret, MountKey: opts.MountKey, Conns: opts.Conns, DialTimeout: opts.DialTimeout}
	f.addrs, f.wopts = opts.Servers, wopts
	for _, i := range f.indexes {
		addr := opts.Servers[i]
		if opts.LoadBalanced {
			f.servers = append(f.servers, newFailover(preferred(opts.Servers, i, wopts), opts.Log))
		} else {
			f.servers = append(f.servers, wire.NewClient(addr, wopts))
		}
		var l *localSlab
		if wire.IsLocal(addr) && !opts.RemoteReads {
			l = newLocalSlab(addr, wire.Credentials{Secret: opts.Secret, MountKey: opts.MountKey}, opts.DialTimeout, opts.ExtentSize)
		}
		f.local = append(f.local, l)
	}
	go f.pusher()
	return f, nil
}

// preferred returns clients of the servers at addrs, starting with first
// and going on in index order: a load-balanced client's order of
// preference.
func preferred(addrs []string, first int, opts wire.ClientOptions) []*wire.Client {
	var clients []*wire.Client
	for k := range addrs {
		clients = append(clients, wire.NewClient(addrs[(first+k)%len(addrs)], opts))
	}
	return clients
}

// Connect reaches every server and checks that server i of the list is
// server i of an instance of len(Servers) servers with the same extent size.
// A load-balanced client reaches the server its node picks, or the next
// one that answers, since any of them serves it alike.
func (f *FS) Connect(ctx context.Context) error {
	return eachOf(f.every(), func(i int) error {
		rep, err := f.servers[i].Do(ctx, &wire.Call{Op: wire.OpInfo, Cred: ident.Process()})
		if err != nil {
			return err
		}
		d := wire.NewDecoder(rep.Meta)
		index, n, es, inst, lb := int(d.Uint32()), int(d.Uint32()), d.Int64(), d.String(), d.Bool()
		takesCaps := d.More() && d.Bool()
		f.servers[i].SendCaps(takesCaps)
		if l := f.local[i]; l != nil {
			l.srv.SendCaps(takesCaps)
		}
		place := index == f.indexes[i] || f.loadBalanced && index < f.total
		if !place || n != f.total || es != f.layout.ExtentSize || lb != f.loadBalanced {
			return fmt.Errorf("%w: %s is server %d of %d of instance %q with %d-byte extents (load-balanced: %v), expected server %d of %d with %d-byte extents (load-balanced: %v)",
				ErrMisconfigured, f.servers[i].Addr(), index, n, inst, es, lb, f.indexes[i], f.total, f.layout.ExtentSize, f.loadBalanced)
		}
		return d.Err()
	})
}

// Close makes durable what this client wrote and did not make durable
// yet, publishes the sizes its writes gave files, then closes the
// connections. The error says if something could not be made durable or
// published, or was lost by a server that restarted (ErrServerRestarted).
// Only the first call does anything.
func (f *FS) Close() error {
	f.closed.Do(func() { f.closeErr = f.close() })
	return f.closeErr
}

func (f *FS) close() error {
	close(f.stop)
	<-f.pusherDone
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := errors.Join(f.syncAll(ctx), f.pushAll(ctx))
	for _, s := range f.servers {
		_ = s.Close()
	}
	for _, l := range f.local {
		if l != nil {
			l.close()
		}
	}
	return err
}

// cred returns the caller's identity carried by ctx, or the process's.
func cred(ctx context.Context) ident.Cred {
	if c, ok := ident.FromContext(ctx); ok {
		return c
	}
	return ident.Process()
}

// call sends one request to server i.
func (f *FS) call(ctx context.Context, i int, op wire.Op, args *wire.Encoder, data, dst []byte) (wire.Reply, error) {
	return f.servers[i].Do(ctx, &wire.Call{Op: op, Cred: cred(ctx), Args: args.Bytes(), Data: data, Dst: dst})
}

// meta sends a metadata request about path to its metadata server. It is
// not given up when ctx is cancelled (a signal interrupting the caller):
// the server may have carried it out already, and a caller that retried a
// create with O_EXCL, a mkdir or a rename would see it fail.
func (f *FS) meta(ctx context.Context, path string, op wire.Op, args *wire.Encoder) (*wire.Decoder, error) {
	var rep wire.Reply
	call := func() (err error) {
		rep, err = f.call(context.WithoutCancel(ctx), f.layout.MetaServer(path), op, args, nil, nil)
		return err
	}
	var err error
	if readOnlyMeta[op] {
		err = f.retryLost(call)
	} else {
		err = call()
	}
	if err != nil {
		return nil, err
	}
	return wire.NewDecoder(rep.Meta), nil
}

// readOnlyMeta are the metadata operations that change nothing, which
// meta sends again when their connection breaks: after a server restarted,
// the first call on each connection to the old one fails.
var readOnlyMeta = map[wire.Op]bool{
	wire.OpGetAttr: true, wire.OpAccess: true, wire.OpReadDir: true, wire.OpReadlink: true,
	wire.OpGetxattr: true, wire.OpListxattr: true, wire.OpMayUnlink: true,
}

// every returns the indexes of all the servers.
func (f *FS) every() []int {
	servers := make([]int, len(f.servers))
	for i := range servers {
		servers[i] = i
	}
	return servers
}

// eachOf runs fn for servers in parallel and returns the errors joined.
func eachOf(servers []int, fn func(i int) error) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for j, i := range servers {
		wg.Go(func() { errs[j] = fn(i) })
	}
	wg.Wait()
	return firstErrno(errs)
}

// someServers sends a path request to the servers, to the end like meta.
func (f *FS) someServers(ctx context.Context, servers []int, op wire.Op, args *wire.Encoder) error {
	ctx = context.WithoutCancel(ctx)
	return eachOf(servers, func(i int) error {
		_, err := f.call(ctx, i, op, args, nil, nil)
		return err
	})
}

// allServers sends a path request to every server, to the end like meta.
func (f *FS) allServers(ctx context.Context, op wire.Op, args *wire.Encoder) error {
	return f.someServers(ctx, f.every(), op, args)
}

// firstErrno returns the first non-nil error, so that its errno is the one
// the caller sees, with the others joined for the message.
func firstErrno(errs []error) error {
	var first error
	var rest []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		} else {
			rest = append(rest, err)
		}
	}
	if first == nil || len(rest) == 0 {
		return first
	}
	return fmt.Errorf("%w (and %w)", first, errors.Join(rest...))
}

func pathArgs(path string) *wire.Encoder { return (&wire.Encoder{}).String(path) }
