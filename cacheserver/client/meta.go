package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
	"github.com/burstcache/burstcache/cacheserver/wire"
)

// attrCall sends a metadata request that answers an Attr.
func (f *FS) attrCall(ctx context.Context, p string, op wire.Op, args *wire.Encoder) (namespace.Attr, error) {
	d, err := f.meta(ctx, p, op, args)
	if err != nil {
		return namespace.Attr{}, err
	}
	a := d.Attr()
	return a, d.Err()
}

// GetAttr asks the metadata server of p, which knows the sizes that writes
// of every client announced.
func (f *FS) GetAttr(ctx context.Context, p string) (namespace.Attr, error) {
	a, err := f.attrCall(ctx, p, wire.OpGetAttr, pathArgs(p))
	if err != nil {
		return a, err
	}
	f.learn(p, a)
	return f.withWrites(p, a), nil
}

// SetAttr changes attributes. A size change cuts the backing file (which
// checks the caller may), trims every server, then records the size.
func (f *FS) SetAttr(ctx context.Context, p string, in namespace.SetAttr) (namespace.Attr, error) {
	if in.Size == nil {
		a, err := f.attrCall(ctx, p, wire.OpSetAttr, pathArgs(p).SetAttr(in))
		if err != nil {
			return a, err
		}
		if in.Mtime != nil || in.MtimeNow {
			f.setTimes(p)
		}
		f.learn(p, a)
		return f.withWrites(p, a), nil
	}
	if err := f.pushSize(ctx, p); err != nil {
		return namespace.Attr{}, err
	}
	if _, err := f.attrCall(ctx, p, wire.OpSetAttr, pathArgs(p).SetAttr(in)); err != nil {
		return namespace.Attr{}, err
	}
	return f.truncate(ctx, p, *in.Size)
}

// TruncateOpen truncates p through a descriptor the caller opened for
// writing (ftruncate(2)), which works even if the file lost its write
// permission since the open.
func (f *FS) TruncateOpen(ctx context.Context, p string, size int64) (namespace.Attr, error) {
	if err := f.pushSize(ctx, p); err != nil {
		return namespace.Attr{}, err
	}
	if _, err := f.attrCall(ctx, p, wire.OpTruncateOpen, pathArgs(p).Int64(size)); err != nil {
		return namespace.Attr{}, err
	}
	return f.truncateVia(ctx, p, size, true)
}

// truncate trims every server to size, then has the metadata server record
// it and cut the backing file again.
func (f *FS) truncate(ctx context.Context, p string, size int64) (namespace.Attr, error) {
	return f.truncateVia(ctx, p, size, false)
}

// truncateVia is truncate; viaOpen cuts the backing file as TruncateOpen does.
func (f *FS) truncateVia(ctx context.Context, p string, size int64, viaOpen bool) (namespace.Attr, error) {
	f.sizeMu.Lock()
	defer f.sizeMu.Unlock()
	f.forget(p)
	if err := f.allServers(ctx, wire.OpTrim, pathArgs(p).Int64(size)); err != nil {
		return namespace.Attr{}, err
	}
	a, err := f.attrCall(ctx, p, wire.OpTruncate, pathArgs(p).Int64(size).Bool(viaOpen))
	if err == nil {
		f.learn(p, a)
	}
	return a, err
}

// Open checks the caller may open p; O_TRUNC also empties the cached file.
func (f *FS) Open(ctx context.Context, p string, flags int) (namespace.Attr, error) {
	a, err := f.attrCall(ctx, p, wire.OpOpen, pathArgs(p).Uint32(uint32(flags)))
	if err != nil {
		return a, err
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return f.truncate(ctx, p, 0)
	}
	f.learn(p, a)
	return a, nil
}

// Create creates and opens a regular file. A file that existed is opened
// as Open does, O_TRUNC included: the servers may hold its data.
func (f *FS) Create(ctx context.Context, p string, flags int, mode uint32) (namespace.Attr, error) {
	d, err := f.meta(ctx, p, wire.OpCreate, pathArgs(p).Uint32(uint32(flags)).Uint32(mode))
	if err != nil {
		return namespace.Attr{}, err
	}
	a := d.Attr()
	existed := d.More() && d.Bool()
	if err := d.Err(); err != nil {
		return namespace.Attr{}, err
	}
	if existed && flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return f.truncate(ctx, p, 0)
	}
	f.forget(p)
	f.learn(p, a)
	return a, nil
}

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

// Rename writes back and drops the cached data of both names on every
// server, since extents are keyed by path, then renames. The write-back
// moves the backing file's modification time to its own time: the time
// the job last gave the file is put back on the new name.
func (f *FS) Rename(ctx context.Context, oldPath, newPath string, flags uint32) error {
	if err := f.pushSize(ctx, oldPath); err != nil {
		return err
	}
	before, err := f.GetAttr(ctx, oldPath)
	if err != nil {
		return err
	}
	var other namespace.Attr
	if flags&unix.RENAME_EXCHANGE != 0 {
		if other, err = f.GetAttr(ctx, newPath); err != nil {
			return err
		}
	}
	f.sizeMu.Lock()
	defer f.sizeMu.Unlock()
	if err := f.flushAndDrop(ctx, oldPath, newPath); err != nil {
		return err
	}
	f.forget(oldPath, newPath)
	f.settled(oldPath, newPath)
	if _, err := f.meta(ctx, oldPath, wire.OpRename, pathArgs(oldPath).String(newPath).Uint32(flags)); err != nil {
		return err
	}
	f.keepMtime(ctx, newPath, before)
	if flags&unix.RENAME_EXCHANGE != 0 {
		f.keepMtime(ctx, oldPath, other)
	}
	return nil
}

// keepMtime gives the regular file p the modification time it had in
// before, which a write-back since then moved. Setting an explicit time
// needs ownership of the file: for a caller who renamed a file of another
// user, the backing file keeps the time of the write-back. It reports
// whether the time was put back.
func (f *FS) keepMtime(ctx context.Context, p string, before namespace.Attr) bool {
	if !before.IsRegular() {
		return false
	}
	mtime := before.Mtime
	_, err := f.attrCall(ctx, p, wire.OpSetAttr, pathArgs(p).SetAttr(namespace.SetAttr{Mtime: &mtime}))
	return err == nil
}

// flushAndDrop writes back and forgets the cached data of the paths on every
// server. A path the servers do not know is not an error. What this client
// wrote to a path and has not made durable is checked as a sync checks it:
// a server that restarted since it took the writes may have lost them, and
// then nothing says so but this call (ErrServerRestarted), since the
// writes are settled afterwards.
func (f *FS) flushAndDrop(ctx context.Context, paths ...string) error {
	ctx = context.WithoutCancel(ctx)
	for _, p := range paths {
		err := f.settleOn(ctx, wire.OpFlushAndDrop, p, f.every(), f.takeUnsynced(p))
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
	}
	return nil
}

// Link writes back the data of oldPath before the new name appears, since
// the cache keys extents by path and the new name must show the same data.
func (f *FS) Link(ctx context.Context, oldPath, newPath string) (namespace.Attr, error) {
	if err := f.pushSize(ctx, oldPath); err != nil {
		return namespace.Attr{}, err
	}
	before, err := f.GetAttr(ctx, oldPath)
	if err != nil {
		return namespace.Attr{}, err
	}
	if err := f.flushAndDrop(ctx, oldPath); err != nil {
		return namespace.Attr{}, err
	}
	f.forget(oldPath)
	f.settled(oldPath)
	a, err := f.attrCall(ctx, oldPath, wire.OpLink, pathArgs(oldPath).String(newPath))
	if err != nil {
		return a, err
	}
	if f.keepMtime(ctx, newPath, before) {
		a.Mtime = before.Mtime
	}
	return a, nil
}

// NoteHidden tells the metadata server of the hidden name p, before the
// mount renames an open file that was unlinked to it, that the name is one:
// the server removes it at the teardown of the instance if the mount has
// not removed it by then (fusefs.HiddenNoter).
func (f *FS) NoteHidden(ctx context.Context, p string) error {
	_, err := f.meta(ctx, p, wire.OpNoteHidden, pathArgs(p))
	return err
}

// Access checks access(2) permission bits.
func (f *FS) Access(ctx context.Context, p string, mask uint32) error {
	_, err := f.meta(ctx, p, wire.OpAccess, pathArgs(p).Uint32(mask))
	return err
}

// ReadDir lists a directory.
func (f *FS) ReadDir(ctx context.Context, p string) ([]namespace.DirEntry, error) {
	d, err := f.meta(ctx, p, wire.OpReadDir, pathArgs(p))
	if err != nil {
		return nil, err
	}
	es := d.DirEntries()
	return es, d.Err()
}

// Mkdir creates a directory.
func (f *FS) Mkdir(ctx context.Context, p string, mode uint32) (namespace.Attr, error) {
	return f.attrCall(ctx, p, wire.OpMkdir, pathArgs(p).Uint32(mode))
}

// Mknod creates a special file.
func (f *FS) Mknod(ctx context.Context, p string, mode uint32, dev uint64) (namespace.Attr, error) {
	return f.attrCall(ctx, p, wire.OpMknod, pathArgs(p).Uint32(mode).Uint64(dev))
}

// Rmdir removes an empty directory.
func (f *FS) Rmdir(ctx context.Context, p string) error {
	_, err := f.meta(ctx, p, wire.OpRmdir, pathArgs(p))
	return err
}

// Symlink creates a symbolic link.
func (f *FS) Symlink(ctx context.Context, target, p string) (namespace.Attr, error) {
	return f.attrCall(ctx, p, wire.OpSymlink, (&wire.Encoder{}).String(target).String(p))
}

// Readlink reads a symbolic link.
func (f *FS) Readlink(ctx context.Context, p string) (string, error) {
	d, err := f.meta(ctx, p, wire.OpReadlink, pathArgs(p))
	if err != nil {
		return "", err
	}
	target := d.String()
	return target, d.Err()
}

// StatFS sums the capacity and use of every server's cache.
func (f *FS) StatFS(ctx context.Context) (namespace.StatFS, error) {
	sts := make([]namespace.StatFS, len(f.servers))
	err := eachOf(f.every(), func(i int) error {
		rep, err := f.call(ctx, i, wire.OpStatFS, &wire.Encoder{}, nil, nil)
		if err != nil {
			return err
		}
		d := wire.NewDecoder(rep.Meta)
		sts[i] = d.StatFS()
		return d.Err()
	})
	if err != nil {
		return namespace.StatFS{}, err
	}
	sum := sts[0]
	for _, st := range sts[1:] {
		sum.Blocks += st.Blocks * uint64(st.Bsize) / uint64(sum.Bsize)
		sum.Bfree += st.Bfree * uint64(st.Bsize) / uint64(sum.Bsize)
		sum.Bavail += st.Bavail * uint64(st.Bsize) / uint64(sum.Bsize)
	}
	return sum, nil
}
