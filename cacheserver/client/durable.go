package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// ErrServerRestarted is returned by Flush, Fsync and Close when a server
// that took writes of a file restarted before they were made durable: a
// server commits its index on its own only now and then, so writes that
// no commit covered were lost in its crash, and its sync finds nothing
// left to make durable. It wraps syscall.EIO, which close(2) or fsync(2)
// then returns.
var ErrServerRestarted = fmt.Errorf("cache server restarted since the file was written, losing writes it had not made durable: %w", syscall.EIO)

// Incarnations of a server (see OpSync) as the client records them.
const (
	// unknownIncarnation is what a server too old to name its incarnation
	// answers.
	unknownIncarnation uint64 = 0
	// mixedIncarnations records writes since the last sync that more than
	// one incarnation of a server took: the server restarted among them.
	mixedIncarnations uint64 = ^uint64(0)
)

// incarnations collects, safely from the goroutines of one write, the
// incarnation of each server that took a piece.
type incarnations struct {
	mu sync.Mutex
	m  map[int]uint64
}

// add records that server i's incarnation inc took a piece.
func (t *incarnations) add(i int, inc uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[int]uint64{}
	}
	t.m[i] = merge(t.m, i, inc)
}

// merge returns what m records for server i once incarnation inc also
// took writes.
func merge(m map[int]uint64, i int, inc uint64) uint64 {
	if old, ok := m[i]; ok && old != inc {
		return mixedIncarnations
	}
	return inc
}

// writeIncarnation returns the incarnation a write's reply names, or
// unknownIncarnation.
func writeIncarnation(rep wire.Reply) uint64 {
	d := wire.NewDecoder(rep.Meta)
	d.Uint32() // the count written
	return optionalUint64(d)
}

// optionalUint64 reads a u64 that older servers do not send.
func optionalUint64(d *wire.Decoder) uint64 {
	if !d.More() {
		return unknownIncarnation
	}
	return d.Uint64()
}

// Flush is called by the FUSE layer at every close. A file this client
// wrote since it last made it durable is made durable now, as Fsync does,
// on the servers the writes went to: close returns once the data is where
// their durability puts it (on their SSDs, or written back), so a server
// that crashes after a job closed a file loses none of it. A server that
// restarted since it took writes of the file may have lost them: close
// then fails (ErrServerRestarted). Every write that extended the file
// announced the new size to the metadata server already, so the next open
// anywhere sees it. What the client knows of the file stays while other
// descriptors of it are open (each open learns it afresh); Released
// forgets it.
func (f *FS) Flush(ctx context.Context, path string) error {
	wrote := f.takeUnsynced(path)
	if len(wrote) == 0 {
		return nil
	}
	err := f.syncOn(ctx, path, slices.Sorted(maps.Keys(wrote)), wrote)
	f.showWrites(ctx, path)
	return err
}

// showWrites moves the modification time of the backing file of path to
// now when this client's last write to it came well after the time the
// servers showed: the file would show that older time from the close
// until its write-back, which may be hours away, and rsync or make would
// take a file changed in place for the old one. A file created by the
// open shows its creation time, close enough, and costs nothing more here.
// "Now" needs only write permission; a caller who lost it since the open
// leaves the time to the write-back.
func (f *FS) showWrites(ctx context.Context, path string) {
	f.mu.Lock()
	st := f.files[path]
	behind := st != nil && st.wrote.Sub(st.mtime) > mtimeSlack
	f.mu.Unlock()
	if !behind {
		return
	}
	since := f.asked()
	a, err := f.attrCall(ctx, path, wire.OpSetAttr, pathArgs(path).SetAttr(namespace.SetAttr{MtimeNow: true}))
	if err != nil {
		f.log.Debug("Leaving the modification time to write-back", "path", path, "err", err)
		return
	}
	f.learn(path, a, since)
}

// mtimeSlack is how far the backing file's modification time may lag
// behind this client's last write to it at close.
const mtimeSlack = time.Second

// Fsync publishes the size and makes the data durable on every server, as
// their durability setting says.
func (f *FS) Fsync(ctx context.Context, path string) error {
	return f.syncOn(ctx, path, f.every(), f.takeUnsynced(path))
}

// syncOn publishes path's size and syncs it on servers. wrote holds the
// servers this client wrote the file to since it last made it durable,
// with the incarnations that took the writes. Those whose sync failed
// stay recorded for the next close or fsync; those that restarted
// meanwhile do not: the loss is reported once, by this call, as the kernel
// reports a failed write-back once.
func (f *FS) syncOn(ctx context.Context, path string, servers []int, wrote map[int]uint64) error {
	if err := f.pushSize(ctx, path); err != nil {
		f.markUnsynced(path, wrote)
		return err
	}
	return f.syncServers(context.WithoutCancel(ctx), path, servers, wrote)
}

// syncServers sends OpSync for path to servers, in parallel, and checks
// that each server in wrote answers as the incarnation that took the
// writes.
func (f *FS) syncServers(ctx context.Context, path string, servers []int, wrote map[int]uint64) error {
	return f.settleOn(ctx, wire.OpSync, pathArgs(path), path, servers, wrote)
}

// settleOn sends op (OpSync, or OpFlushAndDrop) with args, which makes
// what the servers hold of path durable or writes it back and answers
// their incarnation, to servers in parallel, and checks that each server in
// wrote answers as the incarnation that took the writes. Those whose call
// failed stay recorded in unsynced for the next close or fsync; a server
// that restarted meanwhile does not: the loss is reported once, by this
// call, as the kernel reports a failed write-back once.
func (f *FS) settleOn(ctx context.Context, op wire.Op, args *wire.Encoder, path string, servers []int, wrote map[int]uint64) error {
	var retry incarnations
	err := eachOf(servers, func(i int) error {
		want, wroteThere := wrote[i]
		got, err := f.settleOne(ctx, op, args, i)
		if err != nil {
			if wroteThere {
				retry.add(i, want)
			}
			return err
		}
		if wroteThere && got != want {
			f.log.Error("Cache server restarted before writes of a file were durable; they may be lost", "path", path, "server", f.servers[i].Addr())
			return fmt.Errorf("%w: %s", ErrServerRestarted, f.servers[i].Addr())
		}
		return nil
	})
	f.markUnsynced(path, retry.m)
	return err
}

// retryLost runs call, again while its connection breaks. Only for calls
// that may be carried out twice, such as a sync or a durable size. After a
// server restarted, each connection the client kept to the old one fails
// its next call, so it tries once more than there are connections: with
// three tries and four connections, a rename after a restart failed now and
// then with the broken connection instead of the restart.
func (f *FS) retryLost(call func() error) error {
	var err error
	for range f.conns + 1 {
		if err = call(); !errors.Is(err, wire.ErrConnLost) {
			return err
		}
	}
	return err
}

// settleOne sends op with args to server i and returns the incarnation
// that answered.
func (f *FS) settleOne(ctx context.Context, op wire.Op, args *wire.Encoder, i int) (uint64, error) {
	var rep wire.Reply
	err := f.retryLost(func() (err error) {
		rep, err = f.call(ctx, i, op, args, nil, nil)
		return err
	})
	if err != nil {
		return 0, err
	}
	return optionalUint64(wire.NewDecoder(rep.Meta)), nil
}

// syncAll makes durable, as the process, every file this client wrote
// since it last made the file durable: writes that came after the last
// close of a file (the kernel writes the pages of a shared mapping back
// when it is unmapped, after the close), and those whose close failed.
func (f *FS) syncAll(ctx context.Context) error {
	ctx = ident.NewContext(ctx, ident.Process())
	f.mu.Lock()
	paths := slices.Collect(maps.Keys(f.unsynced))
	f.mu.Unlock()
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for j, p := range paths {
		wg.Go(func() {
			wrote := f.takeUnsynced(p)
			errs[j] = f.syncOn(ctx, p, slices.Sorted(maps.Keys(wrote)), wrote)
		})
	}
	wg.Wait()
	return firstErrno(errs)
}

// markUnsynced records that this client wrote path's data to the servers
// of wrote, which the incarnations there took, since it last made the file
// durable.
func (f *FS) markUnsynced(path string, wrote map[int]uint64) {
	if len(wrote) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.unsynced[path]
	if set == nil {
		set = map[int]uint64{}
		f.unsynced[path] = set
	}
	for i, inc := range wrote {
		set[i] = merge(set, i, inc)
	}
}

// takeUnsynced returns the servers this client wrote path's data to since
// it last made the file durable, with the incarnations that took the
// writes, and forgets them.
func (f *FS) takeUnsynced(path string) map[int]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.unsynced[path]
	delete(f.unsynced, path)
	return set
}

// settled forgets that this client wrote to paths, whose data is gone or
// was written back: their next close has nothing to make durable.
func (f *FS) settled(paths ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range paths {
		delete(f.unsynced, p)
	}
}
