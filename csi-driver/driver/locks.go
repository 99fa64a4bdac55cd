package driver

import (
	"fmt"
	"sync"
)

// volumeLocks lets one call at a time work on a volume. A second call for a
// volume that is busy does not wait: it fails with ErrBusy, which the RPC
// boundary answers with Aborted, so that the caller retries later rather
// than pile up behind a slow mount or unmount.
type volumeLocks struct {
	mu   sync.Mutex
	busy map[string]bool
}

func newVolumeLocks() *volumeLocks { return &volumeLocks{busy: map[string]bool{}} }

// lock takes the lock of id, or returns ErrBusy. The caller must call the
// returned function to release it.
func (l *volumeLocks) lock(id string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[id] {
		return nil, fmt.Errorf("volume %s: %w", id, ErrBusy)
	}
	l.busy[id] = true
	return func() {
		l.mu.Lock()
		delete(l.busy, id)
		l.mu.Unlock()
	}, nil
}
