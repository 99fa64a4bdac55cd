package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"syscall"

	"github.com/burstcache/burstcache/cacheserver/placement"
)

// preloadFile is a regular file found by a preload's walk.
type preloadFile struct {
	path string
	size int64
}

// preload copies up the extents this server holds of the file p, or of
// every file under the directory p: its share of the extents when striped,
// every extent when load-balanced. It walks the tree first, so that Stats
// can say how many bytes the preload copies up in all, then copies them,
// counting the bytes done. It returns the total. As cp -r does, it
// preloads all it can read: a directory it cannot list or a file it cannot
// read is passed over and named in the error it returns at the end.
func (s *Server) preload(ctx context.Context, p string) (int64, error) {
	var failed preloadErrors
	files := s.preloadWalk(ctx, p, false, nil, &failed)
	l := s.layout()
	var total int64
	for _, f := range files {
		total += s.ownedBytes(l, f)
	}
	var done int64
	s.preloads.add(0, total)
	// A preload that ended, however it ended, no longer counts.
	defer func() { s.preloads.add(-done, -total) }()
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := s.preloadExtents(ctx, l, f, &done); err != nil {
			failed.add(fmt.Errorf("preloading %s: %w", f.path, err))
		}
	}
	if err := failed.err(); err != nil {
		return 0, err
	}
	return total, nil
}

// preloadWalk appends the regular files at or under p to files, and what
// it could not look at to failed. A mount point that a listing found
// (listed) is passed over as a special file is: the cache serves no file
// system mounted inside the backing directory (EXDEV).
func (s *Server) preloadWalk(ctx context.Context, p string, listed bool, files []preloadFile, failed *preloadErrors) []preloadFile {
	if ctx.Err() != nil {
		failed.add(ctx.Err())
		return files
	}
	a, err := s.cfg.NS.GetAttr(ctx, p)
	if listed && errors.Is(err, syscall.EXDEV) {
		return files
	}
	if err != nil {
		failed.add(err)
		return files
	}
	if a.IsRegular() {
		return append(files, preloadFile{path: p, size: a.Size})
	}
	if !a.IsDir() {
		return files
	}
	es, err := s.cfg.NS.ReadDir(ctx, p)
	if err != nil {
		failed.add(err)
		return files
	}
	for _, e := range es {
		files = s.preloadWalk(ctx, path.Join(p, e.Name), true, files, failed)
	}
	return files
}

// preloadErrors gathers what a preload passed over. It keeps the first
// maxPreloadErrors, and counts the others, so that a tree of many
// unreadable directories does not make an answer of unbounded size.
type preloadErrors struct {
	errs []error
	more int
}

const maxPreloadErrors = 20

func (p *preloadErrors) add(err error) {
	if len(p.errs) < maxPreloadErrors {
		p.errs = append(p.errs, err)
		return
	}
	p.more++
}

// err joins the errors gathered, nil if none.
func (p *preloadErrors) err() error {
	if p.more > 0 {
		return errors.Join(append(p.errs, fmt.Errorf("and %d more paths not preloaded", p.more))...)
	}
	return errors.Join(p.errs...)
}

func (s *Server) layout() placement.Layout {
	return placement.Layout{Servers: s.cfg.Info.Servers, ExtentSize: s.cfg.Info.ExtentSize}
}

// owns reports whether this server copies up extent e of p.
func (s *Server) owns(l placement.Layout, p string, e int64) bool {
	return s.cfg.LoadBalanced || l.ExtentServer(p, e) == s.cfg.Info.Index
}

// extentBytes is how many bytes of a file of size bytes extent e holds.
func extentBytes(l placement.Layout, size, e int64) int64 {
	return min(l.ExtentSize, size-e*l.ExtentSize)
}

// ownedBytes is how many bytes of f this server copies up.
func (s *Server) ownedBytes(l placement.Layout, f preloadFile) int64 {
	var n int64
	for e := int64(0); e*l.ExtentSize < f.size; e++ {
		if s.owns(l, f.path, e) {
			n += extentBytes(l, f.size, e)
		}
	}
	return n
}

// preloadExtents reads the extents this server holds of f through the
// cache, which copies up those it does not hold yet, and adds the bytes to
// done and to the server's tally as each extent is in.
func (s *Server) preloadExtents(ctx context.Context, l placement.Layout, f preloadFile, done *int64) error {
	buf := make([]byte, l.ExtentSize)
	for e := int64(0); e*l.ExtentSize < f.size; e++ {
		if !s.owns(l, f.path, e) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := s.cfg.Cache.ReadAt(ctx, f.path, buf, e*l.ExtentSize)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		n := extentBytes(l, f.size, e)
		*done += n
		s.preloads.add(n, 0)
	}
	return nil
}

// preloadTally sums the progress of the preloads that run on a server, for
// Stats: the bytes they have copied up and the bytes they will copy up in
// all. Both are zero when no preload runs.
type preloadTally struct {
	mu          sync.Mutex
	done, total int64
}

func (t *preloadTally) add(done, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done += done
	t.total += total
}

func (t *preloadTally) snapshot() (done, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done, t.total
}
