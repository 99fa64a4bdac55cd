package fusefs

import (
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
)

// Invalidate makes the kernel drop what it caches of each namespace path
// ("" is the root) and of everything the mount knows below it, so that
// changes made behind the mount's back, on the backing file system, show:
// first each file's pages, after the kernel wrote the dirty ones to the
// namespace (it does that before it drops a page, and nothing written is
// lost), and its attributes; then the names, deepest first. The kernel's
// write-back cache (Options.ClientCache) keeps a file's size and
// modification time as it knows them whatever the namespace answers, for
// as long as it holds the inode: only a name it forgot is looked up
// afresh, into an inode that takes the namespace's size. A file open
// through the mount keeps its inode, and so the size the kernel knew,
// until its last close.
//
// Invalidate must not be called from a request handler of the mount: the
// kernel waits for the writes of dirty pages, which the mount serves, and
// holds the page locks that reads of those files wait for.
func (s *Server) Invalidate(paths []string) {
	for _, p := range paths {
		s.invalidate(p)
	}
}

// maxNamedOpen is how many of the open files under an invalidated path
// its warning names. It counts them all: a job that holds 10,000 files
// open logged 10,000 lines for each server that told of the path.
const maxNamedOpen = 10

// known is a name the mount knows, under a path being invalidated.
type known struct {
	parent *fs.Inode
	name   string
	node   *fs.Inode
}

func (s *Server) invalidate(p string) {
	s.xattrsChanged()
	top := known{node: &s.root.Inode}
	if p != "" {
		for name := range strings.SplitSeq(p, "/") {
			child := top.node.GetChild(name)
			if child == nil {
				return
			}
			top = known{parent: top.node, name: name, node: child}
		}
	}
	// The tree, walked top down and notified bottom up. go-fuse's
	// children maps are copies, so the kernel may forget names meanwhile.
	below := []known{top}
	for i := 0; i < len(below); i++ {
		if below[i].node.IsDir() {
			for name, child := range below[i].node.Children() {
				below = append(below, known{parent: below[i].node, name: name, node: child})
			}
		}
	}
	var open []string
	count := 0
	for _, k := range below {
		s.notify("content", k.node.Path(nil), k.node.NotifyContent(0, 0))
		if n, ok := k.node.Operations().(*node); ok && s.opts.ClientCache && !n.IsDir() && n.isOpen() {
			if count++; len(open) < maxNamedOpen {
				open = append(open, n.path())
			}
		}
	}
	if count > 0 {
		s.log.Warn("Files open through the mount keep the size the kernel knew until their last close: reads may stop short or read zeros, and appends land at that size",
			"files", count, "paths", open)
	}
	for i := len(below) - 1; i >= 0; i-- {
		if k := below[i]; k.parent != nil {
			s.notify("name", k.node.Path(nil), k.parent.NotifyEntry(k.name))
		}
	}
}

// isOpen reports whether the mount has handles of n open.
func (n *node) isOpen() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.opens > 0
}

// notify logs a notification that the kernel refused for another reason
// than not knowing the inode or name.
func (s *Server) notify(what, path string, errno syscall.Errno) {
	if errno != 0 && errno != syscall.ENOENT {
		s.log.Warn("Invalidating the kernel's cache failed", "what", what, "path", path, "err", errno)
	}
}
