package engine

import (
	"context"
	"runtime"
	"strings"
	"sync"

	"github.com/burstcache/burstcache/cacheserver/backing"
)

// gate is a backing store whose reads wait until the test opens it, so
// that a test can hold copy-ups in flight for as long as it needs instead
// of hoping that a latency outlasts the scheduler.
type gate struct {
	backing.Store
	es      int64
	open    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	entered map[int64]bool
}

func newGate(s backing.Store, es int64) *gate {
	return &gate{Store: s, es: es, open: make(chan struct{}), entered: map[int64]bool{}}
}

// ReadAt records the extent read and waits for the gate to open.
func (g *gate) ReadAt(ctx context.Context, p string, b []byte, off int64) (int, error) {
	g.mu.Lock()
	g.entered[off/g.es] = true
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return g.Store.ReadAt(ctx, p, b, off)
}

// release opens the gate; later calls do nothing.
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// waiting returns how many distinct extents reads have entered the gate.
func (g *gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.entered)
}

// parkedReaders counts the goroutines that block inside readExtent, either
// in a copy-up held by g or on the lock of an extent being copied up. It
// reads the goroutines' stacks: the engine has no other way to say that a
// reader is waiting for someone else's copy-up, which is what the caller
// must be sure of before it opens g.
func parkedReaders() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	parked := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[running]") || strings.Contains(header, "[runnable]") ||
			!strings.Contains(g, "(*Engine).readExtent") {
			continue
		}
		if strings.Contains(g, "(*RWMutex).RLock") || strings.Contains(g, "(*gate).ReadAt") {
			parked++
		}
	}
	return parked
}
