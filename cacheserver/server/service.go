package server

import (
	"context"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/cacheserver/namespace"
)

var _ control.Service = (*Server)(nil)

// Flush writes back every dirty byte. Backing-store writes run as the
// identities the engine recorded with the data.
func (s *Server) Flush(ctx context.Context) (int64, error) {
	start := time.Now()
	stop := s.logFlushProgress(start)
	err := s.cfg.Cache.Flush(ctx)
	stop()
	s.flushes.record(time.Since(start))
	return s.cfg.Cache.Stats().DirtyBytes, err
}

// flushProgressEvery is how often a flush logs the dirty bytes it has left.
// The flush before a teardown may take minutes, and its caller (local down,
// the controller) shows nothing until it returns.
var flushProgressEvery = 10 * time.Second

// logFlushProgress logs the dirty bytes left every flushProgressEvery,
// until the function it returns is called.
func (s *Server) logFlushProgress(start time.Time) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(flushProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				s.log.Info("Flushing", "dirtyBytes", s.cfg.Cache.Stats().DirtyBytes,
					"elapsed", time.Since(start).Round(time.Second))
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// Drain makes writes fail with EROFS, then flushes.
func (s *Server) Drain(ctx context.Context) (int64, error) {
	s.log.Info("Draining: refusing new writes")
	s.draining.Store(true)
	return s.Flush(ctx)
}

// Drained reports whether Drain or Discard was called: the server refuses
// writes.
func (s *Server) Drained() bool { return s.draining.Load() }

// Discard makes writes fail with EROFS and marks the server's cache files
// for removal when it stops (see Discarded).
func (s *Server) Discard(context.Context) error {
	s.log.Warn("Discarding: refusing new writes; the cache files go when the server stops, dirty data included",
		"dirtyBytes", s.cfg.Cache.Stats().DirtyBytes)
	s.draining.Store(true)
	s.discarded.Store(true)
	return nil
}

// Discarded reports whether Discard was called: the teardown of the
// server's instance dropped the data not written back, and the files that
// hold it are to go with the server.
func (s *Server) Discarded() bool { return s.discarded.Load() }

// FlushPath writes back the dirty data of path.
func (s *Server) FlushPath(ctx context.Context, p string) error {
	return s.pathCall(ctx, p, s.cfg.Cache.FlushPath)
}

// EvictPath drops the clean data of path.
func (s *Server) EvictPath(ctx context.Context, p string) error {
	return s.pathCall(ctx, p, s.cfg.Cache.EvictPath)
}

// InvalidatePath forgets the clean data of path, then tells the clients
// that watch (wire.OpWatch) and waits until they dropped what their
// kernels cache of it: the cache's extents first, so that a kernel that
// reads the file again does not find the old bytes here.
func (s *Server) InvalidatePath(ctx context.Context, p string) error {
	return s.pathCall(ctx, p, func(ctx context.Context, p string) error {
		if err := s.cfg.Cache.InvalidatePath(ctx, p); err != nil {
			return err
		}
		return s.notices.tell(ctx, p)
	})
}

// Preload copies up, as the server's identity, the extents this server
// holds of the file p or of every file under the directory p, and returns
// how many bytes they hold.
func (s *Server) Preload(ctx context.Context, p string) (int64, error) {
	var n int64
	err := s.pathCall(ctx, p, func(ctx context.Context, p string) error {
		var err error
		n, err = s.preload(ctx, p)
		return err
	})
	return n, err
}

func (s *Server) pathCall(ctx context.Context, p string, fn func(context.Context, string) error) error {
	if err := namespace.CheckPath(p); err != nil {
		return err
	}
	return errnoOf(fn(s.serverCtx(ctx), p))
}

// Stats returns the engine's statistics and the server's description.
func (s *Server) Stats(context.Context) (control.Stats, error) {
	st := s.cfg.Cache.Stats()
	st.Server = s.cfg.Info
	st.Server.Draining = s.draining.Load()
	st.Flushes, st.FlushSeconds = s.flushes.snapshot()
	st.PreloadBytesDone, st.PreloadBytesTotal = s.preloads.snapshot()
	st.HiddenNames = int64(s.hidden.count())
	st.RefusedConnections, st.RefusedControlCalls = s.wire.Refused(), s.control.Refused()
	st.Server.ActAsCaller = s.cfg.ActAsCaller
	st.Server.AccessMode = "Striped"
	if s.cfg.LoadBalanced {
		st.Server.AccessMode = "LoadBalanced"
	}
	return st, nil
}

// SetTunables changes the engine's knobs.
func (s *Server) SetTunables(_ context.Context, t control.Tunables) error {
	return s.cfg.Cache.SetTunables(t)
}

// Ready reports whether the data path is served.
func (s *Server) Ready() bool { return s.serving.Load() }

// flushTimes counts the whole-cache flushes that ended and the time they
// took, for Stats and the flush duration metric.
type flushTimes struct {
	mu    sync.Mutex
	count uint64
	total time.Duration
}

func (f *flushTimes) record(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	f.total += d
}

func (f *flushTimes) snapshot() (uint64, float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count, f.total.Seconds()
}
