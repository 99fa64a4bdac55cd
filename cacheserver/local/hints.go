package local

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/burstcache/burstcache/cacheserver/control"
)

// Hint is a per-path control call: flush, evict, invalidate or preload.
type Hint func(c *control.Client, ctx context.Context, path string) error

// Hints maps the names of the hints to their calls.
var Hints = map[string]Hint{
	"flush":      (*control.Client).FlushPath,
	"evict":      (*control.Client).EvictPath,
	"invalidate": (*control.Client).InvalidatePath,
	"preload":    preload,
}

// preload is Client.Preload as a Hint: the local commands report no
// progress, only the outcome.
func preload(c *control.Client, ctx context.Context, path string) error {
	_, err := c.Preload(ctx, path)
	return err
}

// SendHint sends a hint about path (relative to the backing directory) to
// every server, since each holds some extents of every file.
func SendHint(ctx context.Context, st *State, hint Hint, path string) error {
	errs := make([]error, len(st.Servers))
	var wg sync.WaitGroup
	for i, s := range st.Servers {
		wg.Go(func() {
			c, err := st.controlClient(s, nil)
			if err == nil {
				err = hint(c, ctx, path)
			}
			if err != nil {
				errs[i] = fmt.Errorf("server %d: %w", s.Index, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
