package client

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// watchRetry is how long a watch waits before it asks a server again
// after its connection broke.
const watchRetry = time.Second

// Watch calls drop, until Close, with the paths that a server was told to
// invalidate, "" standing for every path when the server cannot tell
// which (it restarted, or the client was away for too long). drop is
// called from one goroutine per server, of every server of the instance
// (a load-balanced client too: each server is told), and each server's
// invalidation waits until drop returned for it, so that drop must not
// return before what it drops is gone. A server of an earlier release
// tells nothing: the client watches it no further.
//
// Each watch has a connection of its own, which the server holds a
// request on while nothing happens.
func (f *FS) Watch(drop func(paths []string)) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-f.stop
		cancel()
	}()
	opts := f.wopts
	opts.Conns = 1
	for _, addr := range f.addrs {
		go f.watch(ctx, wire.NewClient(addr, opts), drop)
	}
}

func (f *FS) watch(ctx context.Context, cl *wire.Client, drop func([]string)) {
	defer func() { _ = cl.Close() }()
	var epoch, seq uint64
	// late says that the first watch failed: the mount may have cached
	// paths that the server invalidated before the watch began.
	late := false
	for {
		args := (&wire.Encoder{}).Uint64(epoch).Uint64(seq)
		rep, err := cl.Do(ctx, &wire.Call{Op: wire.OpWatch, Cred: ident.Process(), Args: args.Bytes()})
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, syscall.ENOSYS):
			f.log.Info("Cache server tells no invalidations: the kernel keeps what it caches of paths invalidated there", "server", cl.Addr())
			return
		case err != nil:
			late = late || epoch == 0
			f.log.Debug("Watching for invalidations failed; retrying", "server", cl.Addr(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(watchRetry):
			}
			continue
		}
		d := wire.NewDecoder(rep.Meta)
		e, last, all, n := d.Uint64(), d.Uint64(), d.Bool(), d.Uint32()
		paths := make([]string, 0, min(n, 1024))
		for range n {
			paths = append(paths, d.String())
		}
		if err := d.Err(); err != nil {
			f.log.Warn("Cache server answered a watch badly", "server", cl.Addr(), "err", err)
			return
		}
		if all || late && epoch == 0 {
			paths = []string{""}
		}
		if len(paths) > 0 {
			drop(paths)
		}
		epoch, seq = e, last
	}
}
