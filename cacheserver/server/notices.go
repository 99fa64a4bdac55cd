package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/wire"
)

// maxNotices is how many invalidated paths a server remembers for the
// clients that watch (wire.OpWatch). A client further behind, one whose
// connection was down meanwhile, drops everything its kernel caches.
const maxNotices = 4096

// maxNoticeBytes bounds the paths of one answer to wire.OpWatch, well
// within what a frame may carry (wire.MaxMeta): the paths a server
// remembers may be longer, PATH_MAX each, and a client that is told more
// drops everything instead, as one further behind does. An answer past
// the frame's bound would be refused by the client, at each of its tries.
const maxNoticeBytes = wire.MaxMeta / 2

// noticeWait bounds how long an invalidation waits for the watching
// clients to drop what their kernels cache of the path. A client's kernel
// first writes back the dirty pages of the files, which may wait for
// cache space.
const noticeWait = 30 * time.Second

// rejoinWait is how long after a server starts serving an invalidation
// waits at least. The clients that watched the server's previous run
// watch again within their retry interval (a second) of its start, after
// a dial that began before the start gave up (wire.DefaultDialTimeout,
// three seconds), and are then told to drop everything; until they do,
// they watch nothing, and an invalidation that counted only the clients
// watching would return while their kernels still serve what it was to
// drop.
const rejoinWait = 5 * time.Second

// notices numbers the paths the server invalidated and hands them to the
// clients that watch, so that mounts with the client cache drop the
// pages, sizes and names their kernels hold of them: the engine forgetting
// its clean extents is not enough for those, which read from their
// kernel's page cache and trust its sizes.
type notices struct {
	epoch uint64

	mu  sync.Mutex
	seq uint64
	log []notice // the last maxNotices, oldest first
	// watchers holds, per connection of a watching client (named by
	// wire.ConnGone), the seq the client said it is done with.
	watchers map[<-chan struct{}]uint64
	// changed is closed and replaced whenever seq or a watcher moves.
	changed chan struct{}
	// rejoinBy is when the clients of a previous run of the server have
	// watched again (see rejoinWait).
	rejoinBy time.Time
}

type notice struct {
	seq  uint64
	path string
}

func newNotices() *notices {
	n := &notices{watchers: map[<-chan struct{}]uint64{}, changed: make(chan struct{})}
	for n.epoch == 0 {
		n.epoch = rand.Uint64()
	}
	return n
}

// serving records that the server began to serve at now.
func (n *notices) serving(now time.Time) {
	n.mu.Lock()
	n.rejoinBy = now.Add(rejoinWait)
	n.mu.Unlock()
}

func (n *notices) changedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// tell records that path was invalidated and waits until every client
// that watched when it was has said it is done with it, or its connection
// ended.
func (n *notices) tell(ctx context.Context, path string) error {
	n.mu.Lock()
	n.seq++
	seq := n.seq
	n.log = append(n.log, notice{seq: seq, path: path})
	if len(n.log) > maxNotices {
		n.log = append(n.log[:0], n.log[len(n.log)-maxNotices:]...)
	}
	n.changedLocked()
	n.mu.Unlock()
	return n.waitFor(ctx, seq)
}

// waitFor waits until no watcher is behind seq, and the clients of a
// previous run of the server had the time to watch again. A watcher's
// connection may end while its client works on what it was told, with no
// request in flight to notice it: the wait looks again at intervals.
func (n *notices) waitFor(ctx context.Context, seq uint64) error {
	timeout := time.NewTimer(noticeWait)
	defer timeout.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		behind, rejoining, changed := n.behind(seq)
		if behind == 0 && !rejoining {
			return nil
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("%d mounts did not drop what their kernels cache of the path within %v: %w", behind, noticeWait, syscall.ETIMEDOUT)
		}
	}
}

// behind counts the watchers still behind seq, forgetting those whose
// connection ended, and reports whether clients of a previous run of the
// server may still be about to watch again.
func (n *notices) behind(seq uint64) (int, bool, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	behind := 0
	for gone, done := range n.watchers {
		select {
		case <-gone:
			delete(n.watchers, gone)
			continue
		default:
		}
		if done < seq {
			behind++
		}
	}
	return behind, time.Now().Before(n.rejoinBy), n.changed
}

// watch serves wire.OpWatch.
func (s *Server) watch(ctx context.Context, req *wire.Request, resp *wire.Response) error {
	epoch, seq := req.Args.Uint64(), req.Args.Uint64()
	if err := req.Args.Err(); err != nil {
		return err
	}
	gone := wire.ConnGone(ctx)
	if gone == nil {
		return fmt.Errorf("watching outside a connection: %w", syscall.EINVAL)
	}
	paths, all, last, err := s.notices.next(ctx, gone, epoch, seq)
	if err != nil {
		return err
	}
	resp.Meta.Uint64(s.notices.epoch).Uint64(last).Bool(all).Uint32(uint32(len(paths)))
	for _, p := range paths {
		resp.Meta.String(p)
	}
	return nil
}

// next records that the client on the connection gone is done with seq of
// epoch and waits for the paths invalidated after it.
func (n *notices) next(ctx context.Context, gone <-chan struct{}, epoch, seq uint64) (paths []string, all bool, last uint64, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case epoch == 0:
		// A client that begins to watch has nothing cached of what came
		// before.
		n.watchers[gone] = n.seq
		n.changedLocked()
		return nil, false, n.seq, nil
	case epoch != n.epoch || seq > n.seq:
		// The server restarted since the client last watched, and what
		// was invalidated while it was down is not known.
		n.watchers[gone] = 0
		n.changedLocked()
		return nil, true, n.seq, nil
	}
	n.watchers[gone] = seq
	n.changedLocked()
	for n.seq == seq {
		changed := n.changed
		n.mu.Unlock()
		select {
		case <-changed:
		case <-gone:
		case <-ctx.Done():
		}
		n.mu.Lock()
		select {
		case <-gone:
			delete(n.watchers, gone)
			return nil, false, 0, fmt.Errorf("watching: %w", wire.ErrConnLost)
		case <-ctx.Done():
			return nil, false, 0, ctx.Err()
		default:
		}
	}
	if len(n.log) == 0 || n.log[0].seq > seq+1 {
		return nil, true, n.seq, nil
	}
	size := 0
	for _, e := range n.log {
		if e.seq > seq {
			if size += len(e.path) + 4; size > maxNoticeBytes {
				return nil, true, n.seq, nil
			}
			paths = append(paths, e.path)
		}
	}
	return paths, false, n.seq, nil
}
