package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/burstcache/burstcache/cacheserver/vfs"
)

// slotGensName is the file, in the cache directory, of the slots'
// generation numbers.
const slotGensName = "slotgens"

// slotGens are generation numbers of the slab's slots, in a file that
// clients on this machine map read-only, so that they can keep reading an
// extent from the slab without asking the engine each time (see Lease).
//
// The file is an array of 64-bit words in the machine's byte order, which
// only processes of this machine read: word 0 is the
// engine's epoch, incremented by every Open, and word 1+s the generation of
// slot s. A slot's generation grows whenever what the slot holds stops
// being what a reader last learned of it: its extent is written (in place
// or moved by copy-on-write), trimmed, dropped or evicted. A reader that
// learned slot s, generation g and epoch p with a lease, and finds both
// words unchanged, reads bytes of the same extent that are current. The
// file is not durable state: a crash leaves it as it was, and the next
// Open moves the epoch on, which voids every lease of the engine before.
type slotGens struct {
	f     *os.File
	mem   []byte
	words []uint64
}

// openSlotGens maps the generation file of a cache directory with slots
// slots and starts a new epoch. It returns nil, without error, for a cache
// directory that is not on the operating system's file system (tests).
func openSlotGens(fsys vfs.FS, dir string, slots int64) (*slotGens, error) {
	if _, ok := fsys.(vfs.OS); !ok {
		return nil, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, slotGensName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening slot generations: %w", err)
	}
	size := 8 * (slots + 1)
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("sizing slot generations: %w", err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("mapping slot generations: %w", err)
	}
	g := &slotGens{f: f, mem: mem, words: unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), slots+1)}
	atomic.AddUint64(&g.words[0], 1)
	return g, nil
}

// bump moves the generation of slot on. The caller holds Engine.mu, so
// that a lease taken under it sees the slot before or after the change.
func (g *slotGens) bump(slot int32) {
	if g != nil {
		atomic.AddUint64(&g.words[slot+1], 1)
	}
}

// gen returns the generation of slot.
func (g *slotGens) gen(slot int32) uint64 { return atomic.LoadUint64(&g.words[slot+1]) }

// epoch returns the engine's epoch.
func (g *slotGens) epoch() uint64 { return atomic.LoadUint64(&g.words[0]) }

func (g *slotGens) close() error {
	if g == nil {
		return nil
	}
	return joinErr(unix.Munmap(g.mem), g.f.Close())
}
