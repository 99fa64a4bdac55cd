package fusefs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// Limits of the extended attributes that lookups ask about: those whose
// reads found them absent in the last probeInterest, at most maxProbed of
// them, the most recent. A mount whose callers read no extended attributes
// asks about none, and its lookups cost what they did.
const (
	probeInterest = 10 * time.Second
	maxProbed     = 4
)

// xattrInterest holds the names of the extended attributes that callers of
// the mount found absent lately, and when.
type xattrInterest struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// note records that a read of the attribute name found it absent.
func (x *xattrInterest) note(name string, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.seen == nil {
		x.seen = map[string]time.Time{}
	}
	x.seen[name] = now
	for len(x.seen) > maxProbed {
		oldest := slices.MinFunc(slices.Collect(maps.Keys(x.seen)), func(a, b string) int {
			return x.seen[a].Compare(x.seen[b])
		})
		delete(x.seen, oldest)
	}
}

// names returns the names found absent within probeInterest of now.
func (x *xattrInterest) names(now time.Time) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var names []string
	for name, at := range x.seen {
		if now.Sub(at) < probeInterest {
			names = append(names, name)
		}
	}
	return names
}

// absentXattr reports whether a getxattr that failed with e says that the
// attribute is not there (ENODATA), or cannot be there (EOPNOTSUPP): the
// only answers that a lookup's probe stands in for. Other failures
// (permission, a file gone, I/O) are asked again.
func absentXattr(e syscall.Errno) bool {
	return e == syscall.ENODATA || e == syscall.EOPNOTSUPP
}

// xattrProbe is what the servers answered, at a thread's last lookup,
// about the extended attributes that callers found absent.
type xattrProbe struct {
	// ino is the file looked up, changes the count of changes of extended
	// attributes through the mount when the lookup began, and cred and at
	// the identity of the thread and the time.
	ino     uint64
	changes uint64
	cred    ident.Cred
	at      time.Time
	// absent holds the errno that a getxattr of each name answered.
	absent map[string]syscall.Errno
}

// newProbe keeps what the servers answered about names, or returns nil
// when nothing is worth keeping.
func newProbe(ctx context.Context, names []string, errs []error) *xattrProbe {
	cred, ok := ident.FromContext(ctx)
	if !ok {
		return nil
	}
	p := &xattrProbe{cred: cred, absent: map[string]syscall.Errno{}}
	for i, err := range errs[:min(len(errs), len(names))] {
		var e syscall.Errno
		if errors.As(err, &e) && absentXattr(e) {
			p.absent[names[i]] = e
		}
	}
	if len(p.absent) == 0 {
		return nil
	}
	return p
}

// probes holds the probe of each thread's last lookup. Threads are told
// apart by the thread id that the kernel gives with each request; one the
// kernel gives none (a caller outside the mount's pid namespace) cannot be
// told from another such caller, and gets no probe kept.
type probes struct {
	mu       sync.Mutex
	byThread map[uint32]*xattrProbe
}

// maxProbeThreads bounds the threads whose probes are kept; past it they
// are all dropped, which costs round trips, never a wrong answer.
const maxProbeThreads = 4096

// keep makes p the probe of the calling thread's last lookup, or forgets
// that thread's probe when p is nil.
func (ps *probes) keep(ctx context.Context, p *xattrProbe) {
	fc, ok := fuse.FromContext(ctx)
	if !ok || fc.Pid == 0 {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p == nil {
		delete(ps.byThread, fc.Pid)
		return
	}
	if ps.byThread == nil || len(ps.byThread) >= maxProbeThreads {
		ps.byThread = map[uint32]*xattrProbe{}
	}
	ps.byThread[fc.Pid] = p
}

// take returns the errno with which the calling thread's last lookup found
// the attribute name of file ino absent, if that answer may serve now, and
// 0 otherwise: the thread's identity must be the same, no change of
// extended attributes may have been made through the mount since the
// lookup began (changes), and the attribute timeout (ttl) must not have
// passed since, the rule by which the kernel trusts the attributes that
// came with it. Each answer serves once: a thread that reads the
// attribute again without a lookup in between asks the servers.
func (ps *probes) take(ctx context.Context, ino uint64, name string, changes uint64, ttl time.Duration) syscall.Errno {
	fc, ok := fuse.FromContext(ctx)
	cred, known := ident.FromContext(ctx)
	if !ok || !known || fc.Pid == 0 {
		return 0
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.byThread[fc.Pid]
	if p == nil || p.ino != ino || p.changes != changes || time.Since(p.at) >= ttl || !sameCred(cred, p.cred) {
		return 0
	}
	e := p.absent[name]
	delete(p.absent, name)
	return e
}

func sameCred(a, b ident.Cred) bool {
	return a.UID == b.UID && a.GID == b.GID && slices.Equal(a.Groups, b.Groups) &&
		a.HasCaps == b.HasCaps && a.Caps == b.Caps
}

// lookupAttr returns the attributes of p and, when the namespace can and
// callers read extended attributes lately, what the servers answered about
// those attributes.
func (n *node) lookupAttr(ctx context.Context, p string) (namespace.Attr, *xattrProbe, error) {
	prober, ok := n.m.fsys.(namespace.XattrProber)
	changes, now := n.m.xattrChanges.Load(), time.Now()
	names := n.m.interest.names(now)
	if !ok || len(names) == 0 {
		a, err := n.m.fsys.GetAttr(ctx, p)
		return a, nil, err
	}
	a, errs, err := prober.GetAttrProbing(ctx, p, names)
	if err != nil {
		return a, nil, err
	}
	probe := newProbe(ctx, names, errs)
	if probe != nil {
		probe.ino, probe.changes, probe.at = a.Ino, changes, now
	}
	return a, probe, nil
}

// probedAbsent returns the errno with which the calling thread's last
// lookup found the attribute name of n absent, if that answer may serve
// now (probes.take), and 0 otherwise.
func (n *node) probedAbsent(ctx context.Context, name string) syscall.Errno {
	return n.m.probes.take(ctx, n.StableAttr().Ino, name, n.m.xattrChanges.Load(), n.m.opts.AttrTimeout)
}

// xattrsChanged records a change of extended attributes through the
// mount, or behind its back: no probe of a lookup that began before it
// answers after it.
func (s *Server) xattrsChanged() {
	s.xattrChanges.Add(1)
}
