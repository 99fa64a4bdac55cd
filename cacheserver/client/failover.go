package client

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/wire"
)

// serverConn is a client's connection to one place of its layout: a server of
// a striped instance, or every server of a load-balanced one (failover).
type serverConn interface {
	Do(ctx context.Context, call *wire.Call) (wire.Reply, error)
	Addr() string
	SendCaps(on bool)
	Close() error
}

var (
	_ serverConn = (*wire.Client)(nil)
	_ serverConn = (*failover)(nil)
)

// failoverHome is how long a load-balanced client stays away from the
// server its node picks once it could not reach it, before it tries it
// again.
var failoverHome = 30 * time.Second

// failover sends the calls of a load-balanced client to the server its node
// picks and, while that one cannot be reached, to the next one that can.
// Every server of a load-balanced instance serves every file, read-only,
// so any of them answers a call as another would, and a call that its
// server did not answer may be sent again. After failoverHome it tries its
// first choice again, so that the load spreads over the servers once the
// server is back.
type failover struct {
	// clients are the servers in the order of preference: the one the
	// node picks, then the next ones in index order.
	clients []*wire.Client
	log     *slog.Logger

	mu   sync.Mutex
	cur  int       // the server calls go to
	left time.Time // when calls last left the first choice
}

// newFailover returns a failover over clients, in the order of preference.
func newFailover(clients []*wire.Client, log *slog.Logger) *failover {
	return &failover{clients: clients, log: log}
}

// Do sends call to the current server, and to the next ones while a server
// cannot be reached or its connection breaks.
func (fo *failover) Do(ctx context.Context, call *wire.Call) (wire.Reply, error) {
	i := fo.pick()
	var rep wire.Reply
	var err error
	for range fo.clients {
		rep, err = fo.clients[i].Do(ctx, call)
		if !unreachable(err) || ctx.Err() != nil {
			return rep, err
		}
		i = fo.moveOn(i, err)
	}
	return rep, err
}

// unreachable reports whether err says that a call's server could not be
// reached or its connection broke, as opposed to an answer.
func unreachable(err error) bool {
	return errors.Is(err, wire.ErrUnreachable) || errors.Is(err, wire.ErrConnLost)
}

// pick returns the server to send a call to: the current one, or the first
// choice again once calls have been away from it for failoverHome.
func (fo *failover) pick() int {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	if fo.cur != 0 && time.Since(fo.left) >= failoverHome {
		fo.cur = 0
	}
	return fo.cur
}

// moveOn records that server i did not answer with err, and returns the
// server to try next.
func (fo *failover) moveOn(i int, err error) int {
	next := (i + 1) % len(fo.clients)
	fo.mu.Lock()
	defer fo.mu.Unlock()
	if fo.cur != i {
		return fo.cur
	}
	fo.cur = next
	if i == 0 {
		fo.left = time.Now()
	}
	fo.log.Warn("Cache server unreachable; sending calls to the next one", "server", fo.clients[i].Addr(), "next", fo.clients[next].Addr(), "err", err)
	return next
}

// home reports whether calls go to the first choice.
func (fo *failover) home() bool {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	return fo.cur == 0
}

// localOf returns the slab reader of the server at place i of the layout,
// if that server is on this machine and reads go to it; nil otherwise.
func (f *FS) localOf(i int) *localSlab {
	l := f.local[i]
	if !l.usable() {
		return nil
	}
	if fo, ok := f.servers[i].(*failover); ok && !fo.home() {
		return nil
	}
	return l
}

// Addr returns the address of the server calls go to.
func (fo *failover) Addr() string {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	return fo.clients[fo.cur].Addr()
}

// SendCaps tells every server's client whether to send the capabilities
// of callers: the servers of an instance run one release.
func (fo *failover) SendCaps(on bool) {
	for _, c := range fo.clients {
		c.SendCaps(on)
	}
}

// Close closes the connections to every server.
func (fo *failover) Close() error {
	for _, c := range fo.clients {
		_ = c.Close()
	}
	return nil
}
