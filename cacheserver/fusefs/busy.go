package fusefs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// busyWindow is how long after the kernel last looked a file up, opened or
// released it a rename over it takes an open of it for one that may be on
// its way (see busyChild).
const busyWindow = time.Second

// usage is when the kernel last looked a file up, opened or released it,
// and for which thread; and when it last did for a thread other than that
// one. Thread 0 is a caller the kernel gave no thread id (one outside the
// mount's pid namespace), which is told from no other.
type usage struct {
	last, byElse time.Time
	by           uint32
}

// note records a use for thread tid at now.
func (u *usage) note(tid uint32, now time.Time) {
	if tid == 0 || tid != u.by {
		// The last use was by another thread: it is now the last use by
		// a thread other than tid, the latest of all.
		u.byElse = u.last
	}
	u.last, u.by = now, tid
}

// lastByOthers returns when the file was last used for a thread other than
// tid, or for any when tid is 0.
func (u usage) lastByOthers(tid uint32) time.Time {
	if tid == 0 || tid != u.by {
		return u.last
	}
	return u.byElse
}

// usages holds the usage of the files the kernel used within the last
// busyWindow, or a little longer, by inode number: go-fuse answers a
// lookup with the node it has of the number, which may be under another
// name in its tree (a file renamed a moment before), and drops the node the
// lookup made, so what a lookup learns must not be kept in that node. The
// records of each window go at the end of the next.
type usages struct {
	mu        sync.Mutex
	cur, prev map[uint64]usage
	since     time.Time
}

// note records a use of file ino for thread tid at now.
func (us *usages) note(ino uint64, tid uint32, now time.Time) {
	us.mu.Lock()
	defer us.mu.Unlock()
	if d := now.Sub(us.since); us.cur == nil || d >= busyWindow {
		// Every record of prev is older than busyWindow by now.
		us.prev, us.cur, us.since = us.cur, map[uint64]usage{}, now
		if d >= 2*busyWindow {
			us.prev = nil
		}
	}
	u, ok := us.cur[ino]
	if !ok {
		u = us.prev[ino]
	}
	u.note(tid, now)
	us.cur[ino] = u
}

// lastByOthers returns when file ino was last used for a thread other than
// tid (any, when tid is 0), if that was within busyWindow or a little
// longer, and the zero time otherwise.
func (us *usages) lastByOthers(ino uint64, tid uint32) time.Time {
	us.mu.Lock()
	defer us.mu.Unlock()
	u, ok := us.cur[ino]
	if !ok {
		u = us.prev[ino]
	}
	return u.lastByOthers(tid)
}

// callerThread returns the id of the thread whose request ctx serves, or 0
// if the kernel gave none.
func callerThread(ctx context.Context) uint32 {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Pid
	}
	return 0
}

// use notes that the kernel looked file ino up, opened or released it just
// now, for the caller of ctx.
func (s *Server) use(ctx context.Context, ino uint64) {
	s.uses.note(ino, callerThread(ctx), time.Now())
}

// busyChild returns the child name of n, a regular file that this mount
// does not have open but that the kernel looked up, opened or released
// within busyWindow for another thread than the caller of ctx (usages),
// counted as open, as openChild does. An open that a path walk before a
// rename over the file sent may still be on its way: a rename over a busy
// file hides it as it hides an open one, and such an open then opens it
// under its hidden name, as on a local file system, rather than finding
// it gone (see removing) and looking the name up again, which the kernel
// does once only. The hidden name goes at the last release, right after
// the rename if none came.
//
// Without the client cache each walk looks the name up, so the walk of
// every open on its way used the file for its own thread; the caller's own
// uses (the lookup of the rename itself, and the calls it made before)
// are not of opens on their way, since a thread makes one call at a time.
// With the client cache a walk may find the name without a lookup, from
// one made for any thread, so every use counts.
func (n *node) busyChild(ctx context.Context, name string) *node {
	c := n.fileChild(name)
	if c == nil || c.StableAttr().Mode != syscall.S_IFREG {
		return nil
	}
	tid := callerThread(ctx)
	if n.m.opts.ClientCache {
		tid = 0
	}
	if time.Since(n.m.uses.lastByOthers(c.StableAttr().Ino, tid)) > busyWindow {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hidden {
		return nil
	}
	c.opens++
	return c
}

// removals marks the files that an unlink, or a rename over them, is
// removing, by inode number, while it runs (see removing).
type removals struct {
	mu sync.Mutex
	by map[uint64]*removal
}

// removal is the removal of a file under way, by n unlinks and renames.
type removal struct {
	done chan struct{}
	n    int
}

// begin marks file ino as being removed until end is called.
func (r *removals) begin(ino uint64) (end func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[uint64]*removal{}
	}
	rm := r.by[ino]
	if rm == nil {
		rm = &removal{done: make(chan struct{})}
		r.by[ino] = rm
	}
	rm.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if rm.n--; rm.n == 0 {
				delete(r.by, ino)
				close(rm.done)
			}
		})
	}
}

// await waits for the end of the removal of file ino under way, if any.
func (r *removals) await(ino uint64) {
	r.mu.Lock()
	rm := r.by[ino]
	r.mu.Unlock()
	if rm != nil {
		<-rm.done
	}
}

// removing marks the file child name of n, if a regular file, as being
// removed until end is called; the caller, an unlink of the name or a
// rename over it, marks it before it looks for opens of the file, and
// ends the mark once the file is gone from the name, or hidden. The kernel
// sends an open after the path walk that found the file, without holding
// the directory: an open that lands after the unlink or rename found the
// file not open, and before the servers removed it, would succeed on a
// file about to go, and its reads would then fail. Such an open waits for
// the mark to end (Open), and then finds the name gone or standing for
// another file, and answers ESTALE: the kernel looks the name up again.
func (n *node) removing(name string) (end func()) {
	c := n.fileChild(name)
	if c == nil || c.StableAttr().Mode != syscall.S_IFREG {
		return func() {}
	}
	return n.m.removals.begin(c.StableAttr().Ino)
}
