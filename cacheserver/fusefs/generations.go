package fusefs

import (
	"sync"
	"time"
)

// generations gives new nodes of the mount the generation (the Gen of
// fs.StableAttr) that tells a file apart from an earlier one under the
// same inode number. The kernel's write-back cache (Options.ClientCache)
// trusts the size it knows of a file for as long as it holds the file's
// inode, whatever the mount answers, and keeps its pages across opens;
// it finds the inode by the node id that go-fuse gives each inode number
// and generation. A file created behind the mount under the inode number
// of one removed (ext4 reuses them at once) would otherwise be looked up
// into the removed file's node and inode, with its size and pages. When
// an open finds such a file, its inode number gets a new generation:
// nodes made from then on are new nodes, of which the kernel makes new
// inodes, while descriptors open on the old inode keep it. So does a file
// changed in place behind the mount (its change time moved), unless it
// was written or changed through the mount, whose own writes move the
// change time as the servers write them back; a lookup that finds such a
// later version of a file whose node opened an earlier one renews it too
// (Server.renewIfChanged), so that the open the kernel retries after an
// ESTALE does not find the earlier node again. Other inode numbers have
// generation 0. (A file created through the mount gets a new node anyway:
// go-fuse makes one for every creation.)
//
// An inode number keeps its generation until a while after the kernel
// forgot its node: the kernel forgets a node it looked up again and
// found another than it held, and looks the name up once more at once.
type generations struct {
	mu      sync.Mutex
	last    uint64
	of      map[uint64]generation
	sweepAt int
}

type generation struct {
	gen uint64
	// forgot is when the kernel forgot the node of gen; zero while it
	// holds it, or may.
	forgot time.Time
}

// forgetAfter is how long an inode number keeps its generation once the
// kernel forgot its node.
const forgetAfter = 10 * time.Second

// current returns the generation of new nodes of ino.
func (g *generations) current(ino uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.of[ino]
	if !ok {
		return 0
	}
	if !e.forgot.IsZero() {
		// A node is being made of it.
		e.forgot = time.Time{}
		g.of[ino] = e
	}
	return e.gen
}

// renew gives ino a new generation.
func (g *generations) renew(ino uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.of == nil {
		g.of = map[uint64]generation{}
	}
	if len(g.of) >= g.sweepAt {
		now := time.Now()
		for ino, e := range g.of {
			if !e.forgot.IsZero() && now.Sub(e.forgot) > forgetAfter {
				delete(g.of, ino)
			}
		}
		g.sweepAt = max(1024, 2*len(g.of))
	}
	g.last++
	g.of[ino] = generation{gen: g.last}
}

// forgot notes that the kernel forgot a node of ino of generation gen.
func (g *generations) forgot(ino, gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.of[ino]; ok && gen != 0 && e.gen == gen {
		e.forgot = time.Now()
		g.of[ino] = e
	}
}
