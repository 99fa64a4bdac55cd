package vfs

import "sync/atomic"

// FailingCommits wraps an FS so that its durable steps fail with Err, without
// running, while Fail is set: the index commits of an engine on a full or
// broken cache disk, whose slab was written long before.
type FailingCommits struct {
	FS
	Err  error
	Fail atomic.Bool
}

// Durable implements FS.
func (f *FailingCommits) Durable(step string, fn func() error) error {
	if f.Fail.Load() {
		return f.Err
	}
	return f.FS.Durable(step, fn)
}
