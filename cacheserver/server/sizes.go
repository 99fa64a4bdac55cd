package server

import (
	"context"
	"sync"

	"github.com/burstcache/burstcache/cacheserver/wire"
)

// sizeHints are the sizes clients announced for files with writes that
// extend them, before those sizes are durable in the cache's index. A
// metadata server answers GetAttr with them at once, which gives other
// clients close-to-open consistency without a commit per write; the writer
// makes the size durable soon after, at fsync, or when it unmounts.
type sizeHints struct {
	mu    sync.Mutex
	sizes map[string]int64
}

// note records that path is at least size bytes long.
func (h *sizeHints) note(path string, size int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sizes == nil {
		h.sizes = map[string]int64{}
	}
	h.sizes[path] = max(h.sizes[path], size)
}

// settled drops the hint for path once the cache durably knows size.
func (h *sizeHints) settled(path string, size int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sizes[path] <= size {
		delete(h.sizes, path)
	}
}

// get returns the hinted size of path, 0 if none.
func (h *sizeHints) get(path string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sizes[path]
}

// withdraw drops the hint for path if it is size: the write that
// announced it failed. A larger hint came from a later write, and stays.
func (h *sizeHints) withdraw(path string, size int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sizes[path] == size {
		delete(h.sizes, path)
	}
}

// forget drops the hint for path: it was truncated, removed or renamed.
func (h *sizeHints) forget(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.sizes, path)
}

// forgetting wraps a handler of a path operation that invalidates the size
// hint of the path.
func forgetting(h handlerFunc) handlerFunc {
	return func(s *Server, ctx context.Context, req *wire.Request, resp *wire.Response) error {
		d := *req.Args
		s.sizes.forget(d.String())
		return h(s, ctx, req, resp)
	}
}
