package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// Unlink drops the file's cached data on every server, then removes the
// name. The caller's right to remove the name is checked while the servers
// doom the file, which saves a round trip: a doom keeps the data, and a
// refused unlink ends it, so a refused unlink loses nothing. A file with
// other names keeps its data: it is written back before it is dropped.
func (f *FS) Unlink(ctx context.Context, p string) error {
	f.sizeMu.Lock()
	defer f.sizeMu.Unlock()
	var a namespace.Attr
	var err error
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		a, err = f.attrCall(ctx, p, wire.OpMayUnlink, pathArgs(p))
	}()
	u := unlink{path: p, id: rand.Uint64() | 1}
	derr := f.doom(ctx, &u)
	<-checked
	if derr != nil {
		return derr
	}
	if err != nil || (a.IsRegular() && a.Nlink > 1) {
		f.endDooms(ctx, u, wire.UnlinkNotRemoved)
		if err != nil {
			return err
		}
		// Another name keeps the data: write it back for that one.
		if err := f.flushAndDrop(ctx, p); err != nil {
			return err
		}
		u.servers = nil
	}
	f.forget(p)
	f.settled(p)
	stop := f.holdDoom(u)
	_, err = f.meta(ctx, p, wire.OpUnlink, pathArgs(p))
	f.endUnlink(ctx, u, err, stop)
	return err
}

// unlink is an unlink under way: its path, the id it gave its dooms, and
// the servers that kept the file doomed for it, or may have.
type unlink struct {
	path    string
	id      uint64
	servers []int
}

// endUnlink ends the dooms of u, whose removal returned err, and calls
// stop once it no longer holds them.
func (f *FS) endUnlink(ctx context.Context, u unlink, err error, stop func()) {
	switch {
	case len(u.servers) == 0:
		stop()
	case err == nil:
		stop()
		f.endDooms(ctx, u, wire.UnlinkRemoved)
	case errors.Is(err, wire.ErrUnreachable):
		// The removal was never asked for.
		stop()
		f.endDooms(ctx, u, wire.UnlinkNotRemoved)
	case wire.Answered(err):
		// The metadata server is done with the removal, which may have
		// removed the file before it failed, or found it gone: the backing
		// store says.
		stop()
		f.endDooms(ctx, u, wire.UnlinkMaybeRemoved)
	default:
		// The answer got lost, and the removal may still be under way on
		// a metadata server that is stopping: were the servers to find the
		// file still there and write it back, the removal would leave a
		// file that write-back brings back. The backing store says once
		// that is over; writes to the file wait meanwhile.
		go func() {
			select {
			case <-f.stop:
				// The servers end the doom by themselves after a while.
				stop()
			case <-time.After(f.lostUnlinkWait):
				stop()
				f.endDooms(context.WithoutCancel(ctx), u, wire.UnlinkMaybeRemoved)
			}
		}()
	}
}

// holdDoom tells the servers that keep u's path doomed, every doomHold
// until stop is called, that the unlink is still under way, so that a
// removal slower than their doom timeout (a metadata server failing over)
// does not end the doom: it would find the file still there and write it
// back, and the late removal would leave a file that write-back brings
// back. A client that dies stops holding, and the servers end the doom by
// themselves.
func (f *FS) holdDoom(u unlink) (stop func()) {
	if len(u.servers) == 0 {
		return func() {}
	}
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(f.doomHold)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := f.someServers(context.Background(), u.servers, wire.OpHoldDoom, pathArgs(u.path)); err != nil {
					f.log.Warn("Holding the doom of a file whose unlink is under way failed", "path", u.path, "err", err)
				}
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// endDooms ends the dooms of u on its servers, as the unlink ended (how):
// the data goes with a file that is gone, and stays with one that is still
// there. Each server ends u's doom only, and once, so an end that comes
// late (another unlink of the file ended the doom first, and a job created
// the file again) touches nothing else, and one whose answer got lost can
// be sent again: a server that did not answer gets it again once it does
// (endDoomsLater). One that misses it all the same ends the doom by itself
// after a while, as the backing store says then; writes to the file wait
// for it meanwhile.
func (f *FS) endDooms(ctx context.Context, u unlink, how uint32) {
	if len(u.servers) == 0 {
		return
	}
	var mu sync.Mutex
	var missed []int
	err := eachOf(u.servers, func(i int) error {
		_, err := f.call(context.WithoutCancel(ctx), i, wire.OpEndDoom, endDoomArgs(u, how), nil, nil)
		if err != nil && !wire.Answered(err) {
			mu.Lock()
			missed = append(missed, i)
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		f.log.Warn("Ending the doom of an unlinked file failed", "path", u.path, "err", err)
	}
	if len(missed) > 0 {
		u.servers = missed
		go f.endDoomsLater(u, how)
	}
}

func endDoomArgs(u unlink, how uint32) *wire.Encoder {
	return pathArgs(u.path).Uint64(u.id).Uint32(how)
}

// endDoomsLater sends the ends of u's dooms again to its servers, which
// did not answer them, until they do, for up to doomHold: a server that
// restarts finds the doom in its index, and the file's writes would wait
// for its timeout meanwhile.
func (f *FS) endDoomsLater(u unlink, how uint32) {
	ctx := ident.NewContext(context.Background(), ident.Process())
	deadline := time.Now().Add(f.doomHold)
	wait := 100 * time.Millisecond
	left := u.servers
	for len(left) > 0 && time.Now().Before(deadline) {
		select {
		case <-f.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
		var again []int
		for _, i := range left {
			_, err := f.call(ctx, i, wire.OpEndDoom, endDoomArgs(u, how), nil, nil)
			switch {
			case err != nil && !wire.Answered(err):
				again = append(again, i)
			case err != nil:
				f.log.Warn("Ending the doom of an unlinked file failed; the server ends it after a while", "path", u.path, "err", err)
			}
		}
		left = again
	}
	if len(left) > 0 {
		f.log.Warn("Servers did not answer the end of an unlinked file's doom; they end it after a while", "path", u.path, "servers", left)
	}
}

// doom begins the unlink u of a regular file on every server (OpDoom):
// they keep what they hold of it, unwritten, until the unlink ends, so
// that a failed unlink loses nothing and a server that crashes meanwhile
// does not write the file back. It sets u.servers to those that kept
// anything. When a server fails, the unlink does not happen, and the dooms
// that began end, also on the servers whose answer got lost.
func (f *FS) doom(ctx context.Context, u *unlink) error {
	ctx = context.WithoutCancel(ctx)
	var mu sync.Mutex
	var kept, unsure []int
	err := eachOf(f.every(), func(i int) error {
		rep, err := f.call(ctx, i, wire.OpDoom, pathArgs(u.path).Uint64(u.id), nil, nil)
		if err != nil {
			if !wire.Answered(err) && !errors.Is(err, wire.ErrUnreachable) {
				mu.Lock()
				unsure = append(unsure, i)
				mu.Unlock()
			}
			return err
		}
		d := wire.NewDecoder(rep.Meta)
		k := d.Bool()
		if err := d.Err(); err != nil {
			return err
		}
		if k {
			mu.Lock()
			kept = append(kept, i)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		f.endDooms(ctx, unlink{path: u.path, id: u.id, servers: append(kept, unsure...)}, wire.UnlinkNotRemoved)
		return err
	}
	slices.Sort(kept)
	u.servers = kept
	return nil
}
