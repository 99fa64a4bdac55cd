package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

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
	a, _, err := f.GetAttrProbing(ctx, p, nil)
	return a, err
}

var _ namespace.XattrProber = (*FS)(nil)

// GetAttrProbing is GetAttr that also asks the server what a Getxattr of
// each of names (at most wire.MaxXattrProbes) as the caller would return
// at the same time: nil when the attribute exists, or the error. A server
// of an earlier release answers none: errs then holds fewer errors than
// names, none at all.
func (f *FS) GetAttrProbing(ctx context.Context, p string, names []string) (a namespace.Attr, errs []error, err error) {
	since := f.asked()
	args := pathArgs(p)
	if len(names) > 0 {
		args.Uint32(uint32(len(names)))
		for _, name := range names {
			args.String(name)
		}
	}
	d, err := f.meta(ctx, p, wire.OpGetAttr, args)
	if err != nil {
		return a, nil, err
	}
	a = d.Attr()
	if d.More() {
		errs = probed(d)
	}
	if err := d.Err(); err != nil {
		return a, nil, err
	}
	f.learn(p, a, since)
	return f.withWrites(p, a), errs, nil
}

// probed reads the answers to the names of an OpGetAttr.
func probed(d *wire.Decoder) []error {
	n := min(d.Uint32(), wire.MaxXattrProbes)
	errs := make([]error, 0, n)
	for range n {
		var err error
		if e := syscall.Errno(d.Uint32()); e != 0 {
			err = e
		}
		errs = append(errs, err)
	}
	return errs
}

// SetAttr changes attributes. A size change cuts the backing file (which
// checks the caller may), trims every server, then records the size.
func (f *FS) SetAttr(ctx context.Context, p string, in namespace.SetAttr) (namespace.Attr, error) {
	if in.Size == nil {
		since := f.asked()
		a, err := f.attrCall(ctx, p, wire.OpSetAttr, pathArgs(p).SetAttr(in))
		if err != nil {
			return a, err
		}
		if in.Mtime != nil || in.MtimeNow {
			f.setTimes(p)
		}
		f.learn(p, a, since)
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
		// The size is what the truncation made it, whatever came before.
		f.learn(p, a, f.asked())
	}
	return a, err
}

// Open checks the caller may open p; O_TRUNC also empties the cached file.
func (f *FS) Open(ctx context.Context, p string, flags int) (namespace.Attr, error) {
	since := f.asked()
	d, err := f.meta(ctx, p, wire.OpOpen, f.withGathered(pathArgs(p).Uint32(uint32(flags))))
	if err != nil {
		return namespace.Attr{}, err
	}
	a := withIdentity(d, d.Attr())
	if err := d.Err(); err != nil {
		return namespace.Attr{}, err
	}
	if a.IsRegular() {
		f.opened(p, a)
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return f.truncate(ctx, p, 0)
	}
	f.learn(p, a, since)
	return a, nil
}

// withGathered ends the arguments of an open or a create with whether the
// kernel gathers this client's writes (Options.GathersWrites); servers of
// an earlier release ignore it.
func (f *FS) withGathered(args *wire.Encoder) *wire.Encoder {
	if f.gathers {
		args.Bool(true)
	}
	return args
}

// masked returns the mode of a creation less the caller's umask that ctx
// carries (ident.WithUmask): the mode that a server of an earlier release
// creates exactly.
func masked(ctx context.Context, mode uint32) uint32 {
	umask, _ := ident.UmaskFromContext(ctx)
	return mode &^ umask
}

// withUmask ends the arguments of a creation, whose mode they hold less the
// umask (masked), with the caller's umask and the mode asked for, when ctx
// carries the umask: the server leaves the umask to the backing file
// system, which ignores it under a directory with a default ACL. Servers
// of an earlier release ignore them.
func withUmask(ctx context.Context, args *wire.Encoder, mode uint32) *wire.Encoder {
	if umask, ok := ident.UmaskFromContext(ctx); ok {
		args.Uint32(umask).Uint32(mode)
	}
	return args
}

// Create creates and opens a regular file. A file that existed is opened
// as Open does, O_TRUNC included: the servers may hold its data.
func (f *FS) Create(ctx context.Context, p string, flags int, mode uint32) (namespace.Attr, error) {
	args := pathArgs(p).Uint32(uint32(flags)).Uint32(masked(ctx, mode))
	if _, ok := ident.UmaskFromContext(ctx); ok {
		// The umask follows, so whether the kernel gathers goes first
		// even when it does not.
		args = withUmask(ctx, args.Bool(f.gathers), mode)
	} else {
		args = f.withGathered(args)
	}
	d, err := f.meta(ctx, p, wire.OpCreate, args)
	if err != nil {
		return namespace.Attr{}, err
	}
	a := d.Attr()
	existed := d.More() && d.Bool()
	a = withIdentity(d, a)
	if err := d.Err(); err != nil {
		return namespace.Attr{}, err
	}
	if existed && flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		f.opened(p, a)
		return f.truncate(ctx, p, 0)
	}
	f.forget(p)
	f.opened(p, a)
	f.learn(p, a, f.asked())
	return a, nil
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
	if err := f.dropKeepingCounts(ctx, oldPath, newPath); err != nil {
		return err
	}
	f.forget(oldPath, newPath)
	f.settled(oldPath, newPath)
	if _, err := f.meta(ctx, oldPath, wire.OpRename, pathArgs(oldPath).String(newPath).Uint32(flags)); err != nil {
		return err
	}
	f.dropRenamed(ctx, oldPath, newPath)
	f.keepMtime(ctx, newPath, before)
	if flags&unix.RENAME_EXCHANGE != 0 {
		f.keepMtime(ctx, oldPath, other)
	}
	return nil
}

// dropRenamed has every server forget what it copied up of the paths of a
// rename while the rename ran: a read from another mount, or a preload,
// that came between the drop before the rename and the rename itself
// copied up the file that the path named then, which the path no longer
// names. Served after the rename, it would show the replaced file's bytes
// under the new name, to every mount, until evicted. Copy-ups still under
// way are waited for and dropped too; those that begin later read the
// renamed files. Another mount may have written a path since the rename,
// so each path goes in the two rounds of flushAndDrop, the second only
// once every server wrote it back. The rename is done whatever this
// finds: a server that fails here is logged, not answered.
func (f *FS) dropRenamed(ctx context.Context, paths ...string) {
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Go(func() {
			err := f.writeBackKeepingSizes(ctx, p, nil)
			if err == nil {
				err = f.forgetEverywhere(ctx, p)
			}
			if err != nil {
				f.log.Warn("Dropping what was copied up during a rename", "path", p, "err", err)
			}
		})
	}
	wg.Wait()
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
//
// Every server writes the paths back, keeping the sizes it recorded,
// before any forgets them. The metadata server of a file whose end lies
// on another server may know the file's size only from its record
// (ExtendSize); had it forgotten the record while that server failed to
// write the end back (it crashed, and keeps the end dirty), the file
// would read short, and a copy or an append would make the loss
// permanent. Once every server wrote the paths back, the backing files
// have their sizes, so a failure in the second round, which writes back
// only writes that came in between, leaves every file whole.
func (f *FS) flushAndDrop(ctx context.Context, paths ...string) error {
	return f.flushAndDropArgs(ctx, nil, paths)
}

// dropKeepingCounts is flushAndDrop before a rename or link of the paths:
// the files that count under maxFiles keep their places, which the call
// gives back only if it succeeds (by a flushAndDrop or forgetEverywhere
// after it). A call that fails leaves the files where they were, and a
// place given back before it would let a job pass maxFiles by failing
// renames of the files it created.
func (f *FS) dropKeepingCounts(ctx context.Context, paths ...string) error {
	return f.flushAndDropArgs(ctx, func(p string) *wire.Encoder {
		return pathArgs(p).Bool(false).Bool(false).Bool(true)
	}, paths)
}

// flushAndDropArgs is flushAndDrop, whose second round sends the arguments
// that forget makes (those of forgetEverywhere when nil).
func (f *FS) flushAndDropArgs(ctx context.Context, forget func(string) *wire.Encoder, paths []string) error {
	ctx = context.WithoutCancel(ctx)
	for _, p := range paths {
		if err := f.writeBackKeepingSizes(ctx, p, f.takeUnsynced(p)); err != nil {
			return err
		}
	}
	if forget == nil {
		forget = pathArgs
	}
	for _, p := range paths {
		if err := knownOrNil(f.settleOn(ctx, wire.OpFlushAndDrop, forget(p), p, f.every(), nil)); err != nil {
			return err
		}
	}
	return nil
}

// writeBackKeepingSizes is the first round of flushAndDrop for p: every
// server writes p back and forgets its clean data, keeping the sizes it
// recorded. wrote is what this client wrote to p and has not made durable,
// checked as flushAndDrop says. A path the servers do not know is not an
// error.
func (f *FS) writeBackKeepingSizes(ctx context.Context, p string, wrote map[int]uint64) error {
	return knownOrNil(f.settleOn(ctx, wire.OpFlushAndDrop, pathArgs(p).Bool(true), p, f.every(), wrote))
}

// forgetEverywhere is the second round of flushAndDrop for p: every server
// writes back what came since the first and forgets p, sizes included.
func (f *FS) forgetEverywhere(ctx context.Context, p string) error {
	return knownOrNil(f.settleOn(ctx, wire.OpFlushAndDrop, pathArgs(p), p, f.every(), nil))
}

// knownOrNil returns err, or nil when it says that the servers do not know
// the path: they hold nothing of it to write back.
func knownOrNil(err error) error {
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// WriteBack writes what every server holds dirty of p, whoever wrote it,
// to the backing file: a time set on the backing file next is then not
// moved by a later write-back of data written before it
// (fusefs.WriteBacker). The servers answer once the data is in the backing
// file, without waiting for its fsync, which does not move the time, and
// keep what they hold. Nothing becomes durable that was not: what this
// client wrote stays to be made durable at the next close or fsync, which
// checks, as ever, that the servers did not restart since they took the
// writes. A path the servers do not know is not an error.
func (f *FS) WriteBack(ctx context.Context, p string) error {
	if err := f.pushSize(ctx, p); err != nil {
		return err
	}
	args := pathArgs(p).Bool(true).Bool(true)
	return knownOrNil(f.settleOn(context.WithoutCancel(ctx), wire.OpFlushAndDrop, args, p, f.every(), nil))
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
	if err := f.dropKeepingCounts(ctx, oldPath); err != nil {
		return namespace.Attr{}, err
	}
	f.forget(oldPath)
	f.settled(oldPath)
	a, err := f.attrCall(ctx, oldPath, wire.OpLink, pathArgs(oldPath).String(newPath))
	if err != nil {
		return a, err
	}
	// A file of several names does not count under maxFiles: its metadata
	// server, the one that counted it, gives its place back.
	meta := []int{f.layout.MetaServer(oldPath)}
	if err := knownOrNil(f.settleOn(context.WithoutCancel(ctx), wire.OpFlushAndDrop, pathArgs(oldPath), oldPath, meta, nil)); err != nil {
		f.log.Warn("Giving back the place under maxFiles of a file linked", "path", oldPath, "err", err)
	}
	if f.keepMtime(ctx, newPath, before) {
		a.Mtime = before.Mtime
	}
	return a, nil
}

// NoteHidden tells the metadata server of the hidden name p, before the
// mount renames an open file to it (for an unlink, or to make way for a
// rename over it: why), that the name is one: the server removes it at the
// teardown of the instance if the mount has not removed it by then, or
// gives the file its name back if the rename did not take place
// (fusefs.HiddenNoter).
func (f *FS) NoteHidden(ctx context.Context, p string, why namespace.Hiding) error {
	args := pathArgs(p)
	if why.Name != "" {
		args.String(why.Name).String(why.Source).Uint64(why.SourceIno)
	}
	_, err := f.meta(ctx, p, wire.OpNoteHidden, args)
	return err
}

// Access checks access(2) permission bits.
func (f *FS) Access(ctx context.Context, p string, mask uint32) error {
	_, err := f.meta(ctx, p, wire.OpAccess, pathArgs(p).Uint32(mask))
	return err
}

// ReadDir lists a directory, a page at a time (see ReadDirPage).
func (f *FS) ReadDir(ctx context.Context, p string) ([]namespace.DirEntry, error) {
	var all []namespace.DirEntry
	for cookie, done := uint64(0), false; !done; {
		var es []namespace.DirEntry
		var err error
		es, cookie, done, err = f.ReadDirPage(ctx, p, cookie, dirPage)
		if err != nil {
			return nil, err
		}
		all = append(all, es...)
	}
	return all, nil
}

// dirPage is the size of the pages ReadDir asks for: the most a server
// answers.
const dirPage = 1 << 20

// ReadDirPage implements namespace.DirPager with wire.OpReadDir. A server
// of an earlier release answers the whole listing, as the last page.
func (f *FS) ReadDirPage(ctx context.Context, p string, cookie uint64, size int) ([]namespace.DirEntry, uint64, bool, error) {
	d, err := f.meta(ctx, p, wire.OpReadDir, pathArgs(p).Uint64(cookie).Uint32(uint32(min(size, dirPage))))
	if err != nil {
		return nil, 0, false, err
	}
	es := d.DirEntries()
	if !d.More() {
		return es, 0, true, d.Err()
	}
	next, done := d.Uint64(), d.Bool()
	switch {
	case d.Err() != nil:
		return nil, 0, false, d.Err()
	case !done && next == cookie:
		return nil, 0, false, fmt.Errorf("listing %q: the server answered the same page again: %w", p, wire.ErrProtocol)
	}
	return es, next, done, nil
}

// Mkdir creates a directory.
func (f *FS) Mkdir(ctx context.Context, p string, mode uint32) (namespace.Attr, error) {
	return f.attrCall(ctx, p, wire.OpMkdir, withUmask(ctx, pathArgs(p).Uint32(masked(ctx, mode)), mode))
}

// Mknod creates a special file.
func (f *FS) Mknod(ctx context.Context, p string, mode uint32, dev uint64) (namespace.Attr, error) {
	return f.attrCall(ctx, p, wire.OpMknod, withUmask(ctx, pathArgs(p).Uint32(masked(ctx, mode)).Uint64(dev), mode))
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

var _ namespace.LinkReader = (*FS)(nil)

// ReadlinkAttr reads a symbolic link and the attributes of the link read.
// A server of an earlier release answers no attributes.
func (f *FS) ReadlinkAttr(ctx context.Context, p string) (string, namespace.Attr, error) {
	d, err := f.meta(ctx, p, wire.OpReadlink, pathArgs(p).Bool(true))
	if err != nil {
		return "", namespace.Attr{}, err
	}
	target := d.String()
	var a namespace.Attr
	if d.More() {
		a = d.Attr()
	}
	return target, a, d.Err()
}

// SyncDir makes the entries of directory p durable on the backing file
// system, through its metadata server. A server of an earlier release
// cannot: its answer is taken as done, as such a mount did.
func (f *FS) SyncDir(ctx context.Context, p string) error {
	_, err := f.meta(ctx, p, wire.OpSyncDir, pathArgs(p))
	if errors.Is(err, syscall.ENOSYS) {
		return nil
	}
	return err
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
