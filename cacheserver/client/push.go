package client

import (
	"context"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// pushDelay is how long the background pusher waits after a write that grew
// a file before it makes the new size durable on the metadata server. Other
// clients see the size at once (each extending write announces it); the
// durable record, which costs the server an index commit, is only needed
// after a crash, and fsync makes it at once.
const pushDelay = time.Second

// kickPush wakes the background pusher. Called with f.mu held.
func (f *FS) kickPush() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// pusher makes the sizes that writes gave files durable on their metadata
// servers, in the background, shortly after the writes. Flush, Fsync and
// GetAttr do it at once.
func (f *FS) pusher() {
	defer close(f.pusherDone)
	for {
		select {
		case <-f.stop:
			return
		case <-f.kick:
		}
		select {
		case <-f.stop:
			return
		case <-time.After(pushDelay):
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		// Sizes that could not be published are published again at close
		// and fsync, which report the error.
		_ = f.pushAll(ctx)
		cancel()
	}
}

// pushAll publishes every pending size and returns the first error.
func (f *FS) pushAll(ctx context.Context) error {
	f.mu.Lock()
	var paths []string
	for p, st := range f.files {
		if st.pending > 0 {
			paths = append(paths, p)
		}
	}
	f.mu.Unlock()
	errs := make([]error, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() { errs[i] = f.pushSize(ident.NewContext(ctx, ident.Process()), p) })
	}
	wg.Wait()
	return firstErrno(errs)
}
