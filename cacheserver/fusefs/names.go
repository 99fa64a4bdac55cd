package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
)

// The servers know a file by its path, which the mount takes from go-fuse's
// tree of inodes at each call. A write that took a path just before a
// rename moved the file (or a directory above it) and reached the servers
// after the rename had written the old path back and dropped it would be
// cached under the old path: the renamed file would miss its bytes, and
// their write-back would make the old name again, creating its parent
// directories. The kernel keeps a file's own rename apart from its writes
// (both hold the file's inode lock), but not the rename of a directory
// above it, nor the write-back of its cached pages.
//
// So the calls that send data or sizes under a path hold Server.names
// shared while they take the path and until they are answered, and a rename
// holds it exclusively until go-fuse's tree has the new name, which go-fuse
// sets after Rename returns.
//
// Reads do not hold renames off: a read that copies from the PFS may take
// long, and a rename over a file being read would wait for it. A read that
// took its path before a rename and reached the servers after it read
// whatever the old path named by then: another file, or none (ENOENT). So a
// rename counts its start and its end (Server.renames, odd while one is
// under way), and a read that overlapped one and whose file moved is made
// again under the new path (readAtPath).

// usePath returns n's path and holds renames off until the returned
// function is called.
func (n *node) usePath() (string, func()) {
	n.m.names.RLock()
	return n.path(), n.m.names.RUnlock
}

// holdNames holds off every data call that would take a path, for a call
// that moves names. The returned function lets them go once go-fuse's tree
// has child (nil: none) under name in parent, or at once if the move
// failed.
func (s *Server) holdNames() func(moved bool, child, parent *fs.Inode, name string) {
	s.names.Lock()
	s.renames.Add(1)
	return func(moved bool, child, parent *fs.Inode, name string) {
		if !moved || child == nil || parent.GetChild(name) == child {
			s.renames.Add(1)
			s.names.Unlock()
			return
		}
		go func() {
			defer s.names.Unlock()
			defer s.renames.Add(1)
			// go-fuse moves the child right after Rename returns; the
			// limit only keeps a child that the kernel forgot meanwhile
			// (and go-fuse with it) from holding every write up.
			deadline := time.Now().Add(time.Second)
			for parent.GetChild(name) != child && time.Now().Before(deadline) {
				time.Sleep(20 * time.Microsecond)
			}
		}()
	}
}

// readAtPath calls read with the path of n, and again with its new path
// when a call that moves names overlapped it and moved n: what the first
// call read may be another file's. The result of the last call stands.
func (n *node) readAtPath(read func(p string) error) error {
	for tries := 1; ; tries++ {
		seq := n.m.renames.Load()
		p := n.path()
		err := read(p)
		if seq%2 == 0 && n.m.renames.Load() == seq || tries == 3 {
			return err
		}
		n.m.names.RLock() // waits for the move under way
		moved := n.path() != p
		n.m.names.RUnlock()
		if !moved {
			return err
		}
	}
}
