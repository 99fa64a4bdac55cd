package client

import (
	"context"
	"sync"
	"time"

	"github.com/burstcache/burstcache/cacheserver/ident"
)

// pushDelay is how long the background pusher waits after a write that grew
// a file, so that a stream of sequential writes costs one ExtendSize per
// delay rather than one per write.
const pushDelay = 2 * time.Millisecond

// kickPush wakes the background pusher. Called with f.mu held.
func (f *FS) kickPush() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// pusher publishes the sizes that writes gave files shortly after the
// writes, in the background. Flush, Fsync and GetAttr publish them at once;
// the pusher covers callers that close a file without a Flush, so that other
// clients soon see the size even then.
func (f *FS) pusher() {
	defer close(f.pusherDone)
	for {
		select {
		case <-f.stop:
			return
		case <-f.kick:
		}
		time.Sleep(pushDelay)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		f.pushAll(ctx)
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
