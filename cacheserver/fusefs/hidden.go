package fusefs

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

// hiddenPrefix starts the names of files that were unlinked while open.
const hiddenPrefix = ".burstcache-open-"

// HiddenNoter is implemented by a namespace.FS that outlives the mount,
// such as the cache servers: the mount tells it each hidden name before it
// gives the name, so that the name does not stay in the backing store for
// good when the mount dies before the file's last close (see the package
// documentation). ENOSYS says it cannot keep the name (a server older than
// the mount), and the mount goes on without.
//
// why says whether the file was unlinked, or is about to be replaced by a
// rename, which may fail: should the mount end before it gives such a file
// its name back, the namespace gives it back instead of removing it, if
// the file to be renamed is still where it was.
type HiddenNoter interface {
	NoteHidden(ctx context.Context, path string, why namespace.Hiding) error
}

// hiddenName is the hidden name of a file in directory dir.
type hiddenName struct {
	dir  *node
	name string
}

// hide renames the open file n, name in parent, to a hidden name, for an
// unlink or a rename over it (why). A rename that fails when the file
// cannot be hidden (failing) has the file given its name back when the
// servers cannot tell whether it was (unanswered).
func (n *node) hide(ctx context.Context, parent *node, name string, why namespace.Hiding, failing bool) syscall.Errno {
	hidden := hiddenPrefix + strconv.FormatUint(rand.Uint64(), 36)
	if hn, ok := n.m.fsys.(HiddenNoter); ok {
		if err := hn.NoteHidden(ctx, parent.child(hidden), why); err != nil && !errors.Is(err, syscall.ENOSYS) {
			return errno(err)
		}
	}
	err := untilAnswered(func() error {
		err := n.m.fsys.Rename(ctx, parent.child(name), parent.child(hidden), renameNoReplace)
		if errors.Is(err, syscall.ENOENT) {
			// A try whose answer got lost with a connection may have
			// moved the file already.
			if a, aerr := n.m.fsys.GetAttr(ctx, parent.child(hidden)); aerr == nil && a.Ino == n.StableAttr().Ino {
				return nil
			}
		}
		return err
	})
	if err != nil {
		if failing && why.Name != "" && unreachable(err) {
			n.unanswered(ctx, parent, name, hidden, why.Source)
		}
		return errno(err)
	}
	parent.MvChild(name, parent.EmbeddedInode(), hidden, true)
	n.hiddenAt.Store(&hiddenName{dir: parent, name: hidden})
	cred, _ := ident.FromContext(ctx)
	n.mu.Lock()
	n.hidden = true
	n.unlinkAs = ident.NewContext(context.Background(), cred)
	n.mu.Unlock()
	return 0
}

// replaced tells the namespace that n, hidden for a rename over it, was
// replaced: its hidden name is then one of a file unlinked, which the
// teardown removes should the mount end before its last release does,
// even if the renamed file is moved back to where the rename took it from
// (which the note of the rename would take for a rename that failed). A
// file that only the rename holds loses its hidden name right after, as
// the rename drops its count: it needs no note.
func (n *node) replaced(ctx context.Context) {
	hn, ok := n.m.fsys.(HiddenNoter)
	h := n.hiddenAt.Load()
	n.mu.Lock()
	held := n.opens > 1
	n.mu.Unlock()
	if !ok || h == nil || !held {
		return
	}
	p := h.dir.child(h.name)
	if err := untilAnswered(func() error { return hn.NoteHidden(ctx, p, namespace.Hiding{}) }); err != nil && !errors.Is(err, syscall.ENOSYS) {
		n.m.log.Warn("Noting a replaced file's hidden name as unlinked failed; should the mount end before the file's last close, and the file renamed over it be moved back first, the teardown would give it its name back",
			"path", p, "err", err)
	}
}

// clearHidden empties directory name of n of the hidden names of files
// unlinked while open that this mount knows, and reports whether it may now
// be empty: it waits for the removals of those whose last release came
// (awaitHiddenRemovals), and moves the others up (liftHidden). The caller
// holds names (holdNames).
func (n *node) clearHidden(ctx context.Context, name string) bool {
	awaited := n.awaitHiddenRemovals(name)
	return n.liftHidden(ctx, name) || awaited
}

// liftHidden moves the files hidden in directory name of n up into n, under
// their hidden names, so that the directory can be removed. It reports
// false, and moves nothing, unless all that the directory holds are hidden
// names of files this mount has open. Each name is noted first, as hide
// notes it, and the caller, who may write n as the removal of the
// directory needs, removes it at the file's last close. The caller holds
// names (holdNames).
func (n *node) liftHidden(ctx context.Context, name string) bool {
	di := n.GetChild(name)
	if di == nil {
		return false
	}
	d, ok := di.Operations().(*node)
	if !ok {
		return false
	}
	es, err := n.m.fsys.ReadDir(ctx, d.path())
	if err != nil || len(es) == 0 {
		return false
	}
	hidden := make([]*node, 0, len(es))
	defer func() {
		for _, c := range hidden {
			_ = c.dropOpen(ctx)
		}
	}()
	for _, e := range es {
		if !strings.HasPrefix(e.Name, hiddenPrefix) {
			return false
		}
		c := d.openChild(e.Name)
		if c == nil {
			return false
		}
		hidden = append(hidden, c)
		if !c.isHidden() {
			return false
		}
	}
	cred, _ := ident.FromContext(ctx)
	for i, c := range hidden {
		hn := es[i].Name
		if noter, ok := n.m.fsys.(HiddenNoter); ok {
			if err := noter.NoteHidden(ctx, n.child(hn), namespace.Hiding{}); err != nil && !errors.Is(err, syscall.ENOSYS) {
				return false
			}
		}
		if err := n.m.fsys.Rename(ctx, d.child(hn), n.child(hn), renameNoReplace); err != nil {
			n.m.log.Warn("Moving a file unlinked while open out of a directory being removed failed", "path", d.child(hn), "err", err)
			return false
		}
		d.MvChild(hn, n.EmbeddedInode(), hn, true)
		c.hiddenAt.Store(&hiddenName{dir: n, name: hn})
		c.mu.Lock()
		c.unlinkAs = ident.NewContext(context.Background(), cred)
		c.mu.Unlock()
	}
	return true
}

// awaitHiddenRemovals waits, a second at most, for the removals under way
// of the hidden names in directory name of n, and reports whether there
// were any. The kernel sends the last release of a file after the close,
// or the exit of its process, has returned: a script that removes a tree
// right after a process that had a file open there ended would otherwise
// find the directory not empty.
func (n *node) awaitHiddenRemovals(name string) bool {
	di := n.GetChild(name)
	if di == nil {
		return false
	}
	waited := false
	for _, ci := range di.Children() {
		c, ok := ci.Operations().(*node)
		if !ok {
			continue
		}
		for deadline := time.Now().Add(time.Second); c.removingHidden() && time.Now().Before(deadline); {
			waited = true
			time.Sleep(time.Millisecond)
		}
	}
	return waited
}

// removingHidden reports whether n is a file unlinked while open whose last
// release is removing its hidden name.
func (n *node) removingHidden() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hidden && n.opens == 0
}

// isHidden reports whether n was given a hidden name.
func (n *node) isHidden() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hidden
}
